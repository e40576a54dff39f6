#!/usr/bin/env bash
# Benchmarks X11 capture: broadcastd against ffmpeg's x11grab and GStreamer's ximagesrc, side by side on
# the same private Xvfb, at 1920x1080 and 3840x2160, all delivering NV12. Writes the X11 section of
# docs/benchmarks.md from the figures of this run. One command: bash bench/x11.sh (bench/run.sh runs it too).
#
# Measured per size, each run BENCH_X11_SECONDS long, BENCH_X11_REPEATS rounds interleaved across tools:
#   cost     CPU time per delivered frame at 30 fps, every frame grabbed and converted whole
#            (broadcastd --no-damage: the cost of a screen that changes everywhere, every frame)
#   max      frames per second delivered when asked for 240 fps, and drops
#   static   CPU per second with a still screen at 60 fps (broadcastd with XDamage, as it runs by default)
#   memory   broadcastd's peak RSS (VmHWM), at its defaults (no --memory-budget: 50 MB, a goal; bench/memory.sh has
#            the plan beside it)
# As users run it: a private PipeWire stack plays a tone into the default sink and another into the default
# source, and broadcastd captures both (--app-audio and --mic at their defaults).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_X11_SECONDS:-8}"
REPEATS="${BENCH_X11_REPEATS:-3}"
SIZES="${BENCH_X11_SIZES:-1920x1080 3840x2160}"

log() { printf '[bench x11] %s\n' "$*" >&2; }
ensure_bench_tools
build_release

WORK="$(mktemp -d /tmp/broadcastd-bench-x11.XXXXXX)"
PIDS=()
XVFB_PID=
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do pkill -KILL -P "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    [ -n "$XVFB_PID" ] && kill "$XVFB_PID" 2>/dev/null && wait "$XVFB_PID" 2>/dev/null
    for pid in "${PIPEWIRE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export XDG_RUNTIME_DIR="$WORK/xdg"; mkdir -m 700 -p "$XDG_RUNTIME_DIR"
PIPEWIRE_PIDS=()
start_pipewire "$WORK/pipewire"
export PIPEWIRE_REMOTE="$WORK/pipewire/pipewire-0"
RESULTS="$WORK/results.tsv"   # one line per run: tool size test rep key=value...
: >"$RESULTS"
HZ=$(getconf CLK_TCK)


# broadcastd SIZE TEST REP FPS [ARGS...]: one broadcast of T seconds to the Python counter handler (which
# touches no pixels), CPU and frames of the daemon alone.
run_broadcastd() {
    local size=$1 test=$2 rep=$3 fps=$4; shift 4
    local sock="$WORK/bd.sock" summary="$WORK/summary.json"
    : >"$WORK/broadcastd.log"
    "$BIN/broadcastd" --config /dev/null --source x11 --fps "$fps" --socket "$sock" --log-level warning \
        --handlers-dir "$ROOT/examples/python" "$@" 2>>"$WORK/broadcastd.log" &
    local pid=$!; PIDS+=("$pid")
    for _ in $(seq 100); do [[ -S $sock ]] || ! kill -0 "$pid" 2>/dev/null || { sleep 0.05; continue; }; break; done
    if [[ ! -S $sock ]]; then
        wait "$pid" 2>/dev/null || true; PIDS=()
        log "broadcastd did not start"; cat "$WORK/broadcastd.log" >&2; exit 1
    fi
    local before after
    read -r before _ < <(cpu_ticks "$pid")
    timeout $((T + 30)) "$BIN/broadcastctl" start --socket "$sock" --handler python-counter --url "file://$summary" \
        --duration "$T" --wait >/dev/null 2>>"$WORK/broadcastctl.log"
    read -r after _ < <(cpu_ticks "$pid")
    local hwm; hwm=$(status_kb "$pid" VmHWM)
    "$BIN/broadcastctl" status --socket "$sock" --json >"$WORK/status.json"
    kill -TERM "$pid"; wait "$pid" || true
    PIDS=()
    python3 - "$WORK/status.json" "$size" "$test" "$rep" "$HZ" "$before" "$after" "$hwm" "$T" <<'PY' >>"$RESULTS"
import json, sys
status, size, test, rep, hz, before, after, hwm, seconds = sys.argv[1:]
s = json.load(open(status))
v = s["streams"]["video"]
delivered = v["delivered"]
grabbed = s.get("capture", {}).get("framesGrabbed", 0)
cpu_ms = (int(after) - int(before)) * 1000 / int(hz)
print("broadcastd", size, test, rep, " ".join(f"{k}={x}" for k, x in dict(
    frames=delivered, grabbed=grabbed, dropped=v["dropped"], repeated=v["repeated"],
    cpu_ms_per_frame=cpu_ms / max(delivered, 1), cpu_pct=cpu_ms / 10 / float(seconds),
    fps=delivered / float(seconds), rss_mb=int(hwm) / 1024,
    audio=s["streams"]["audioApp"]["delivered"] + s["streams"]["audioMic"]["delivered"]).items()))
PY
}

# A peer under /usr/bin/time -v; FRAMES is what it delivered.
record_peer() {  # tool size test rep frames timefile
    python3 - "$@" "$T" <<'PY' >>"$RESULTS"
import re, sys
tool, size, test, rep, frames, path, seconds = sys.argv[1:]
t = open(path, errors="replace").read()
get = lambda k: float(re.search(re.escape(k) + r"[^:]*:\s*([\d.]+)", t).group(1))
frames = max(int(frames), 1)
cpu = get("User time (seconds)") + get("System time (seconds)")
clock = next(l for l in t.splitlines() if "Elapsed (wall clock)" in l).rsplit(" ", 1)[1].split(":")
wall = sum(float(part) * 60 ** i for i, part in enumerate(reversed(clock)))
print(tool, size, test, rep, f"frames={frames} cpu_ms_per_frame={cpu * 1000 / frames} cpu_pct={cpu * 100 / wall} fps={frames / wall} rss_mb={get('Maximum resident set size') / 1024}")
PY
}

run_ffmpeg() {  # size test rep fps
    local out="$WORK/ffmpeg.txt"
    /usr/bin/time -v -o "$out.time" ffmpeg -hide_banner -nostdin -f x11grab -framerate "$4" -video_size "$1" -draw_mouse 1 \
        -i "$DISPLAY" -t "$T" -fps_mode passthrough -pix_fmt nv12 -f rawvideo -y /dev/null 2>"$out" &
    PIDS+=($!); wait "${PIDS[-1]}" 2>/dev/null || true; PIDS=()
    local frames; frames=$(tr '\r' '\n' <"$out" | sed -n 's/^frame= *\([0-9]*\).*/\1/p' | tail -n 1)
    record_peer ffmpeg "$1" "$2" "$3" "${frames:-0}" "$out.time"
}

run_gstreamer() {  # size test rep fps
    local n=$(($4 * T)) out="$WORK/gst.txt"
    /usr/bin/time -v -o "$out.time" timeout $((T * 3 + 10)) gst-launch-1.0 -q ximagesrc display-name="$DISPLAY" use-damage=false num-buffers=$n \
        ! "video/x-raw,framerate=$4/1" ! videoconvert ! video/x-raw,format=NV12 ! fakesink sync=false >"$out" 2>&1 &
    PIDS+=($!); wait "${PIDS[-1]}" 2>/dev/null || true; PIDS=()
    record_peer gstreamer "$1" "$2" "$3" "$n" "$out.time"
}

START=$(date +%s)
for size in $SIZES; do
    n=$(free_display); start_xvfb "$n" "$size"; export DISPLAY=:$n
    xsetroot -solid '#30506e'; xclock -update 1 -geometry 300x300+100+100 2>/dev/null & PIDS_CLOCK=$!
    for rep in $(seq "$REPEATS"); do
        log "$size round $rep/$REPEATS: cost at 30 fps"
        run_broadcastd "$size" cost "$rep" 30 --no-damage
        run_ffmpeg "$size" cost "$rep" 30
        run_gstreamer "$size" cost "$rep" 30
        log "$size round $rep/$REPEATS: 60 fps, every frame grabbed whole"
        run_broadcastd "$size" sixty "$rep" 60 --no-damage
        log "$size round $rep/$REPEATS: highest frame rate (asked for 240 fps)"
        run_broadcastd "$size" max "$rep" 240 --no-damage
        run_ffmpeg "$size" max "$rep" 240
        log "$size round $rep/$REPEATS: a still screen at 60 fps"
        kill "$PIDS_CLOCK" 2>/dev/null; wait "$PIDS_CLOCK" 2>/dev/null || true
        run_broadcastd "$size" static "$rep" 60
        run_ffmpeg "$size" static "$rep" 60
        xclock -update 1 -geometry 300x300+100+100 2>/dev/null & PIDS_CLOCK=$!
    done
    kill "$PIDS_CLOCK" 2>/dev/null; wait "$PIDS_CLOCK" 2>/dev/null || true
    kill "$XVFB_PID"; wait "$XVFB_PID" 2>/dev/null || true; XVFB_PID=
done
ELAPSED=$(($(date +%s) - START))

export BENCH_CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" BENCH_NPROC="$(nproc)"
export BENCH_FFMPEG="$(ffmpeg -version | head -n 1 | cut -d' ' -f1-3)" BENCH_GST="$(gst-launch-1.0 --version | sed -n 2p)"
export BENCH_XVFB="$(dpkg-query -W -f='${Version}' xvfb)" BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export BENCH_ELAPSED="$ELAPSED" BENCH_SECONDS="$T" BENCH_REPEATS="$REPEATS"
export BENCH_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- Sources 2>/dev/null || echo ' (+ uncommitted changes in Sources/)')"
python3 "$ROOT/bench/x11_report.py" "$RESULTS" "$DOC"
log "wrote the X11 section of $DOC (measurements took ${ELAPSED} s)"
cat "$RESULTS" >&2
