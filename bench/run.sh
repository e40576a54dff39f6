#!/usr/bin/env bash
# Benchmarks broadcastd's synthetic pipeline against ffmpeg and GStreamer doing the same job
# (1080p NV12 test frames at a real-time rate handed to a consumer), and regenerates
# docs/benchmarks.md from the figures of this run; then runs bench/x11.sh (X11 capture against
# x11grab and ximagesrc; BENCH_SKIP_X11=1 skips it) and bench/record.sh (the record handler against
# ffmpeg x11grab → libx264, A/V offset, 4K memory; about 30 minutes; BENCH_SKIP_RECORD=1 skips it) and
# bench/stream.sh (the stream handler's glass-to-receiver latency over SRT, CPU and memory, beside ffmpeg;
# BENCH_SKIP_STREAM=1 skips it) and bench/audio.sh (PipeWire app audio and microphone: latency, CPU and
# memory beside GStreamer; BENCH_SKIP_AUDIO=1 skips it) and bench/sync.sh (flashes and beeps through a real
# PipeWire graph, broadcastd beside ffmpeg x11grab + pulse; BENCH_SKIP_SYNC=1 skips it) and bench/many.sh
# (record + stream + inspect on one capture, beside one ffmpeg doing the same encodes; BENCH_SKIP_MANY=1
# skips it) and bench/window.sh (a window against the whole 4K screen and ffmpeg x11grab -window_id, and the
# cost of excluded windows; BENCH_SKIP_WINDOW=1 skips it) and bench/replay.sh (the replay handler against record
# on the same input, and the time a save takes; BENCH_SKIP_REPLAY=1 skips it) and bench/memory.sh (broadcastd's memory
# at its defaults on X11 and through the portal, its plan beside its peak, idle broken down; BENCH_SKIP_MEMORY=1 skips
# it) and bench/quiet.sh (what replay and record cost on a quiet desktop with silence, beside the moving pattern;
# BENCH_SKIP_QUIET=1 skips it). The hour-long soak is bench/soak.sh,
# run on its own.
# One command: bash bench/run.sh
#
# Knobs (environment): BENCH_SECONDS (default 20), BENCH_REPEATS (default 3), BENCH_FPS (default "30 60").
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SECONDS_PER_RUN="${BENCH_SECONDS:-20}"
REPEATS="${BENCH_REPEATS:-3}"
FPS_LIST="${BENCH_FPS:-30 60}"
SIZE=1920x1080
W=${SIZE%x*} H=${SIZE#*x}

log() { printf '[bench] %s\n' "$*" >&2; }

ensure_bench_tools
build_release

# --- cleanup: kill only what this script started, by PID ----------------------------------
WORK="$(mktemp -d /tmp/broadcastd-bench.XXXXXX)"
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do   # the children first (ffmpeg under /usr/bin/time, broadcastctl under timeout)
        pkill -TERM -P "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
# Runs a command in the background and waits for it, so a signal to this script is handled at once.
tracked() { "$@" & local pid=$! rc=0; PIDS+=("$pid"); wait "$pid" || rc=$?; forget "$pid"; return "$rc"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
export XDG_RUNTIME_DIR="$WORK/xdg"; mkdir -m 700 -p "$XDG_RUNTIME_DIR"
RESULTS="$WORK/results.tsv"   # one line per run: tool fps rep key=value...
: >"$RESULTS"


run_broadcastd() {  # fps rep
    local fps=$1 rep=$2 sock="$WORK/bd.sock" summary="$WORK/summary-$1-$2.json"
    "$BIN/broadcastd" --config /dev/null --source synthetic --size "$SIZE" --fps "$fps" --socket "$sock" \
        --handlers-dir "$ROOT/share/broadcastd/handlers" --log-level warning 2>>"$WORK/broadcastd.log" &
    local pid=$!; PIDS+=("$pid")
    for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done
    [[ -S $sock ]] || { log "broadcastd did not create its socket"; cat "$WORK/broadcastd.log" >&2; exit 1; }
    local idle_rss; idle_rss=$(status_kb "$pid" VmRSS)
    local before after t0 t1
    read -r before _ < <(cpu_ticks "$pid"); t0=$(date +%s.%N)
    tracked timeout $((SECONDS_PER_RUN + 60)) "$BIN/broadcastctl" start --socket "$sock" --handler inspect --url "file://$summary" \
        --duration "$SECONDS_PER_RUN" --wait >/dev/null 2>>"$WORK/broadcastctl.log"
    t1=$(date +%s.%N)
    local children
    read -r after children < <(cpu_ticks "$pid")
    local hwm anon shmem file
    hwm=$(status_kb "$pid" VmHWM) anon=$(status_kb "$pid" RssAnon)
    shmem=$(status_kb "$pid" RssShmem) file=$(status_kb "$pid" RssFile)
    "$BIN/broadcastctl" status --socket "$sock" --json >"$WORK/status-$fps-$rep.json"
    kill -TERM "$pid"; wait "$pid" || true
    forget "$pid"
    python3 - "$WORK/status-$fps-$rep.json" "$summary" "$fps" "$rep" "$(getconf CLK_TCK)" \
        "$before" "$after" "$children" "$hwm" "$idle_rss" "$anon" "$shmem" "$file" "$t0" "$t1" <<'EOF' >>"$RESULTS"
import json, sys
status, summary, fps, rep, hz, before, after, children, hwm, idle, anon, shmem, file, t0, t1 = sys.argv[1:]
st = json.load(open(status))["streams"]["video"]
v = json.load(open(summary))["streams"]["video"]
lat = v["latencyMicroseconds"]
n, tick = st["delivered"], 1000 / int(hz)   # ms per clock tick
mb = lambda kb: float(kb) / 1024 if kb != "NA" else float("nan")
print("broadcastd", fps, rep, " ".join(f"{k}={x}" for k, x in dict(
    frames=n, dropped=st["dropped"], gaps=v["sequenceGaps"],
    cpu_ms=(int(after) - int(before)) * tick / n, handler_cpu_ms=int(children) * tick / n,
    p50_us=lat["p50"], p99_us=lat["p99"], max_us=lat["max"],
    rss_mb=mb(hwm), idle_mb=mb(idle), anon_mb=mb(anon), shmem_mb=mb(shmem), file_mb=mb(file),
    wall_s=float(t1) - float(t0)).items()))
EOF
}

# Runs a peer under /usr/bin/time -v; frames is what it produced.
record_peer() {  # tool fps rep frames timefile
    python3 - "$@" <<'EOF' >>"$RESULTS"
import re, sys
tool, fps, rep, frames, path = sys.argv[1:]
t = open(path, errors="replace").read()
get = lambda k: float(re.search(re.escape(k) + r"[^:]*:\s*([\d.]+)", t).group(1))
frames = int(frames)
cpu = get("User time (seconds)") + get("System time (seconds)")
print(tool, fps, rep, f"frames={frames} cpu_ms={cpu * 1000 / frames} rss_mb={get('Maximum resident set size') / 1024}")
EOF
}

run_ffmpeg() {  # fps rep
    local out="$WORK/ffmpeg-$1-$2.txt"
    tracked /usr/bin/time -v -o "$out.time" ffmpeg -hide_banner -nostdin -re -f lavfi \
        -i "testsrc2=size=$SIZE:rate=$1" -pix_fmt nv12 -t "$SECONDS_PER_RUN" -f null - 2>"$out"
    local frames; frames=$(tr '\r' '\n' <"$out" | sed -n 's/^frame= *\([0-9]*\).*/\1/p' | tail -n 1)
    record_peer ffmpeg "$1" "$2" "${frames:-$(($1 * SECONDS_PER_RUN))}" "$out.time"
}

run_gstreamer() {  # fps rep
    local n=$(($1 * SECONDS_PER_RUN)) out="$WORK/gst-$1-$2.txt"
    tracked /usr/bin/time -v -o "$out.time" gst-launch-1.0 -q videotestsrc is-live=true num-buffers=$n \
        ! "video/x-raw,format=NV12,width=$W,height=$H,framerate=$1/1" ! fakesink >"$out" 2>&1
    record_peer gstreamer "$1" "$2" "$n" "$out.time"
}

# --- the runs: interleaved so slow drift of a noisy machine hits every tool alike ------------
START=$(date +%s) LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq "$REPEATS"); do
    for fps in $FPS_LIST; do
        log "round $rep/$REPEATS, ${fps} fps: broadcastd, ffmpeg, gstreamer (${SECONDS_PER_RUN} s each)"
        run_broadcastd "$fps" "$rep"
        run_ffmpeg "$fps" "$rep"
        run_gstreamer "$fps" "$rep"
    done
done
ELAPSED=$(($(date +%s) - START))

# --- the report ---------------------------------------------------------------------------
export BENCH_CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
export BENCH_NPROC="$(nproc)" BENCH_KERNEL="$(uname -srm)"
export BENCH_SWIFT="$(swift --version 2>&1 | head -n 1)"
export BENCH_FFMPEG="$(ffmpeg -version | head -n 1 | cut -d' ' -f1-3)"
export BENCH_GST="$(gst-launch-1.0 --version | sed -n 2p)"
export BENCH_LOAD="$LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after"
export BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" BENCH_ELAPSED="$ELAPSED"
export BENCH_SECONDS="$SECONDS_PER_RUN" BENCH_REPEATS="$REPEATS" BENCH_SIZE="$SIZE"
export BENCH_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- Sources 2>/dev/null || echo ' (+ uncommitted changes in Sources/)')"
python3 "$ROOT/bench/report.py" "$RESULTS" >"$DOC.tmp"
# Keep the X11 and record sections (bench/x11.sh and bench/record.sh write them) across this rewrite.
python3 - "$DOC" "$DOC.tmp" <<'EOF'
import sys
old, new = (open(p).read() if p else "" for p in sys.argv[1:])
for name in ("x11", "record", "stream", "audio", "sync", "soak"):
    begin, end = f"<!-- {name}-begin -->", f"<!-- {name}-end -->"
    if begin in old and end in old:
        open(sys.argv[2], "a").write("\n" + old[old.index(begin):old.index(end) + len(end)] + "\n")
EOF
mv "$DOC.tmp" "$DOC"
log "wrote $DOC (measurements took ${ELAPSED} s)"
cat "$RESULTS" >&2
if [ -z "${BENCH_SKIP_X11:-}" ]; then bash "$ROOT/bench/x11.sh"; fi
if [ "${BENCH_SKIP_RECORD:-}" != 1 ]; then bash "$ROOT/bench/record.sh"; fi
if [ "${BENCH_SKIP_STREAM:-}" != 1 ]; then bash "$ROOT/bench/stream.sh"; fi
if [ "${BENCH_SKIP_AUDIO:-}" != 1 ]; then bash "$ROOT/bench/audio.sh"; fi
if [ "${BENCH_SKIP_SYNC:-}" != 1 ]; then bash "$ROOT/bench/sync.sh"; fi
if [ "${BENCH_SKIP_MANY:-}" != 1 ]; then bash "$ROOT/bench/many.sh"; fi
if [ "${BENCH_SKIP_WINDOW:-}" != 1 ]; then bash "$ROOT/bench/window.sh"; fi
if [ "${BENCH_SKIP_REPLAY:-}" != 1 ]; then bash "$ROOT/bench/replay.sh"; fi
if [ "${BENCH_SKIP_MEMORY:-}" != 1 ]; then bash "$ROOT/bench/memory.sh"; fi
if [ "${BENCH_SKIP_QUIET:-}" != 1 ]; then bash "$ROOT/bench/quiet.sh"; fi
