#!/usr/bin/env bash
# A/V sync through real parts, measured (not a CI test): broadcastd and ffmpeg record the same screen and the
# same app audio at the same time. A private PipeWire stack (scripts/lib.sh start_pipewire, plus
# pipewire-pulse for ffmpeg) and a private 640x360 Xvfb; pipewire-test-beeps plays a beep a second into the
# default sink (exactly a second apart in the sink's clock, asking for a 1024-sample quantum) and says when
# PipeWire plays each; bench/sync_tools.py flashes the screen white at each (a different few ms later each
# time, noted) and, three times, starts a client asking for a 256-sample quantum for 5 s (the graph's
# quantum drops from 1024 to 256: a sink monitor's timing shifts by 16 ms). broadcastd (x11 at 30 fps, app
# audio, the record handler) and ffmpeg (x11grab at 30 fps + pulse from the sink's monitor) record
# BENCH_SYNC_SECONDS (120). In each file every flash's first bright frame and every beep's onset are found with
# ffmpeg; the flashes pin down capture time against file time, and each beep is measured against when
# PipeWire played it: first, mean, largest, trend per minute. Writes the sync section of docs/benchmarks.md.
# One command: bash bench/sync.sh
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_SYNC_SECONDS:-120}"
log() { printf '[bench sync] %s\n' "$*" >&2; }
ensure_packages pipewire-pulse python3-xlib
# BENCH_BIN: binaries already built (a debug build's, say) instead of the release build.
if [ -n "${BENCH_BIN:-}" ]; then BIN=$BENCH_BIN; else ensure_bench_tools; build_release; fi

bench_work sync
pw="$WORK/pipewire"
start_pipewire "$pw"
PIDS+=("${PIPEWIRE_PIDS[@]}")
env XDG_RUNTIME_DIR="$pw" PIPEWIRE_RUNTIME_DIR="$pw" DBUS_SESSION_BUS_ADDRESS="unix:path=$pw/bus" HOME="$pw" \
    XDG_CONFIG_HOME="$pw/config" XDG_STATE_HOME="$pw/state" pipewire-pulse >"$pw/pipewire-pulse.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$pw/pulse/native" ] && break; sleep 0.05; done
[ -S "$pw/pulse/native" ] || { log "pipewire-pulse did not start"; cat "$pw/pipewire-pulse.log" >&2; exit 1; }
n=$(free_display)
start_xvfb "$n" 640x360
PIDS+=("$XVFB_PID")
export DISPLAY=":$n"
ffmpeg -loglevel error -y -f lavfi -i anullsrc=r=48000:cl=stereo -t 10 "$WORK/silence.wav"

log "beeps and flashes, quantum changes at 25 s, 50 s and 75 s in"
spawn env XDG_RUNTIME_DIR="$pw" /usr/bin/python3 "$ROOT/bench/sync_tools.py" flash \
    "$BIN/pipewire-test-beeps --latency 1024" \
    "$WORK/flashes.jsonl" "$(( 28 )),$(( 53 )),$(( 78 ))" "$WORK/silence.wav"
flasher=$LAST
sleep 3

sock="$WORK/bd.sock"
spawn "$BIN/broadcastd" --config /dev/null --source x11 --fps 30 --mic none --socket "$sock" \
    --handlers-dir "$ROOT/share/broadcastd/handlers" --log-level warning 2>"$WORK/broadcastd.log"
bd=$LAST
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
log "recording $T s with broadcastd and with ffmpeg"
spawn "$BIN/broadcastctl" start --socket "$sock" --handler record --url "file://$WORK/broadcastd.mp4" --set audio=app \
    --duration "$T" --wait
ctl=$LAST
spawn env PULSE_SERVER="unix:$pw/pulse/native" ffmpeg -loglevel error -y -f x11grab -framerate 30 -video_size 640x360 \
    -i ":$n" -f pulse -i demo_speakers.monitor -t "$T" -c:v libx264 -preset ultrafast -c:a aac "$WORK/ffmpeg.mkv"
ff=$LAST
reap "$ctl" || true
reap "$ff" || true
kill -TERM "$flasher"; reap "$flasher" || true
kill -TERM "$bd"; reap "$bd" || true

build=$([ -n "${BENCH_BIN:-}" ] && echo "the binaries in ${BENCH_BIN#"$ROOT/"}" || echo "a release build")
/usr/bin/python3 - "$WORK" "$T" "$DOC" "$build" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(sys.argv[3]), "..", "bench"))
from docsection import write_section
import sync_tools
work, seconds, doc, build, date, commit = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
lines = [json.loads(line) for line in open(os.path.join(work, "flashes.jsonl"))]
flashes = [x for x in lines if "beep" in x]
glitches = [x["glitch"] for x in lines if "glitch" in x]
rows = {}
for name, path in (("broadcastd (x11, PipeWire app audio, record)", "broadcastd.mp4"),
                   ("ffmpeg (x11grab + pulse through pipewire-pulse)", "ffmpeg.mkv")):
    rows[name] = sync_tools.summary(sync_tools.offsets(os.path.join(work, path), flashes, glitches))
    print(name, rows[name])
table = "\n".join(
    f"| {name} | {r['marks']} | {r['first']:+.1f} | {r['mean']:+.1f} | {r['max']:+.1f} | {r['trend']:+.2f} | "
    f"{min(r['first10s']):+.1f} to {max(r['first10s']):+.1f} |" for name, r in rows.items() if r)
section = f"""<!-- sync-begin -->
## A/V sync through a real PipeWire graph: flashes and beeps

Taken with `bash bench/sync.sh` on {date} (commit {commit}, {build}; {seconds:.0f} s): broadcastd and ffmpeg record the same 640x360 Xvfb at 30 fps and
the same app audio (the default sink's monitor) at the same time. A beep a second plays into the default sink
(pipewire-test-beeps: exactly a second apart in the sink's clock, saying when PipeWire plays each) and the screen
flashes white at each; three times a client asking for a 256-sample quantum starts for 5 s (the graph's quantum
drops from 1024 to 256, which shifts a sink monitor's timing by 16 ms). Each beep's onset in the file against
when PipeWire played it (capture time against file time pinned by the flashes), in ms (positive: audio late);
beeps from 0.1 s before to 0.4 s after a quantum change or an xrun ({len(glitches)} such events here) are not counted.

| recorder | marks | first | mean | largest | trend per minute | first 10 s |
|---|---|---|---|---|---|---|
{table}

broadcastd stamps app audio with when the sink plays it (PipeWire's timing) and follows the quantum changes
(see `maxClockOffsetMs` in the record handler's result); ffmpeg's pulse input, through pipewire-pulse with its
default buffering in this private stack, is as measured here: what it says about when audio was heard differs
from the picture by the latency pulse reports and drifts.
<!-- sync-end -->
"""
write_section(doc, "<!-- sync-begin -->", "<!-- sync-end -->", section)
print(section)
PY
