#!/usr/bin/env bash
# PipeWire audio, measured (not a CI test). A private PipeWire stack (scripts/lib.sh start_pipewire: a
# 440 Hz tone into the default sink, 880 Hz on the default source) and a private, still 1920x1080 Xvfb.
# broadcastd captures the screen at 30 fps and both audio streams for BENCH_AUDIO_SECONDS (30) to the
# inspect handler, BENCH_REPEATS (3) times, which gives each stream's capture-to-handler latency
# (handler's receive time less the chunk's first-sample timestamp); the same broadcast without audio
# (--app-audio none --mic none) gives what the two streams cost broadcastd in CPU and memory. Beside
# it, in the same run, GStreamer captures the same two streams (pipewiresrc ! fakesink, one process
# each). Writes the audio section of docs/benchmarks.md.
# One command: bash bench/audio.sh
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_AUDIO_SECONDS:-30}"
REPEATS="${BENCH_REPEATS:-3}"
log() { printf '[bench audio] %s\n' "$*" >&2; }
ensure_bench_tools
ensure_packages gstreamer1.0-pipewire
build_release

bench_work audio
start_pipewire "$WORK/pipewire"
PIDS+=("${PIPEWIRE_PIDS[@]}")
n=$(free_display)
start_xvfb "$n" 1920x1080
PIDS+=("$XVFB_PID")
export DISPLAY=":$n"
results="$WORK/results.tsv"
echo -e "run\tkind\tcpu_ticks\trss_kb\tsummary" >"$results"

# broadcastd RUN KIND ARGS...: one broadcast of T s to inspect; a line of figures into $results.
broadcast() {
    local run=$1 kind=$2 sock="$WORK/bd.sock"; shift 2
    rm -f "$sock"
    spawn "$BIN/broadcastd" --config /dev/null --source x11 --fps 30 --socket "$sock" \
        --handlers-dir "$ROOT/share/broadcastd/handlers" --log-level warning "$@" 2>"$WORK/broadcastd-$run-$kind.log"
    local bd=$LAST
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    local before; before=$(cpu_ticks "$bd" | cut -d' ' -f1)
    "$BIN/broadcastctl" start --socket "$sock" --handler inspect --url "file://$WORK/$run-$kind.json" --duration "$T" --wait >/dev/null
    local after rss; after=$(cpu_ticks "$bd" | cut -d' ' -f1); rss=$(status_kb "$bd" VmRSS)
    kill -TERM "$bd"; reap "$bd" || true
    echo -e "$run\t$kind\t$((after - before))\t$rss\t$WORK/$run-$kind.json" >>"$results"
}

# gstreamer RUN: both streams through pipewiresrc for T s; their CPU ticks together into $results.
gstreamer() {
    local run=$1 ticks=0 pid
    local pids=()
    for target in "demo_speakers stream.capture.sink=true" "demo_mic"; do
        set -- $target
        spawn gst-launch-1.0 -q pipewiresrc target-object="$1" \
            stream-properties="props${2:+,$2}" ! "audio/x-raw,format=F32LE,rate=48000,channels=2" ! fakesink
        pids+=("$LAST")
    done
    sleep "$T"
    for pid in "${pids[@]}"; do
        ticks=$((ticks + $(cpu_ticks "$pid" | cut -d' ' -f1)))
        kill -INT "$pid"; reap "$pid" || true
    done
    echo -e "$run\tgstreamer\t$ticks\tNA\t" >>"$results"
}

for run in $(seq "$REPEATS"); do
    log "run $run of $REPEATS: broadcastd with audio, without, GStreamer ($T s each)"
    broadcast "$run" audio
    broadcast "$run" video-only --app-audio none --mic none
    gstreamer "$run"
done

python3 - "$results" "$T" "$DOC" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, os.path.join(os.path.dirname(sys.argv[3]), "..", "bench"))
from docsection import write_section
path, seconds, doc = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = [line.rstrip("\n").split("\t") for line in open(path)][1:]
def cpu(kind):  # % of one core, per run
    return [int(r[2]) / seconds for r in rows if r[1] == kind]   # 100 ticks a second: ticks/s = %
def rss(kind):
    return [int(r[3]) / 1024 for r in rows if r[1] == kind and r[3] != "NA"]
latency = {"audioApp": [], "audioMic": []}
chunk = []  # ms: the app audio's mean chunk length, PipeWire's quantum
for r in rows:
    if r[1] == "audio":
        streams = json.load(open(r[4]))["streams"]
        for name in latency:
            latency[name].append(streams[name]["latencyMicroseconds"])
        app = streams["audioApp"]
        chunk.append((app["lastPts"] - app["firstPts"]) / max(1, app["count"] - 1) / 1e6)
audio, video, gst = cpu("audio"), cpu("video-only"), cpu("gstreamer")
extra = [a - v for a, v in zip(audio, video)]
med = statistics.median
section = f"""<!-- audio-begin -->
## PipeWire audio: app audio and the microphone

Taken with `bash bench/audio.sh` ({len(audio)} runs of {seconds:.0f} s): a private PipeWire 0.3.65 and
WirePlumber 0.4 (`scripts/lib.sh start_pipewire`: a 440 Hz tone into the default sink, 880 Hz on the
default source), a still 1920x1080 Xvfb captured at 30 fps, the `inspect` handler. Medians over the
runs; CPU is broadcastd's own (utime+stime), in % of one core.

| | median | runs |
|---|---|---|
| app audio, capture to handler, p50 / p99 | {med([l["p50"] for l in latency["audioApp"]]) / 1000:.1f} / {med([l["p99"] for l in latency["audioApp"]]) / 1000:.1f} ms | {", ".join(f'{l["p50"] / 1000:.1f}/{l["p99"] / 1000:.1f}' for l in latency["audioApp"])} |
| microphone, capture to handler, p50 / p99 | {med([l["p50"] for l in latency["audioMic"]]) / 1000:.1f} / {med([l["p99"] for l in latency["audioMic"]]) / 1000:.1f} ms | {", ".join(f'{l["p50"] / 1000:.1f}/{l["p99"] / 1000:.1f}' for l in latency["audioMic"])} |
| chunk length (PipeWire's quantum), mean | {med(chunk):.1f} ms | {", ".join(f"{x:.1f}" for x in chunk)} |
| broadcastd CPU with both audio streams | {med(audio):.2f} % | {", ".join(f"{x:.2f}" for x in audio)} |
| broadcastd CPU without audio | {med(video):.2f} % | {", ".join(f"{x:.2f}" for x in video)} |
| what the two audio streams cost broadcastd | {med(extra):.2f} % | {", ".join(f"{x:.2f}" for x in extra)} |
| GStreamer capturing the same two streams (pipewiresrc ! fakesink, two processes) | {med(gst):.2f} % | {", ".join(f"{x:.2f}" for x in gst)} |
| broadcastd RSS with audio / without | {med(rss("audio")):.1f} / {med(rss("video-only")):.1f} MB | |

The latency is measured in the handler: its receive time less the chunk's first-sample timestamp.
For the microphone that includes the chunk's own length (PipeWire's quantum, which the graph sets from
what its clients ask for): {med([l["p50"] for l in latency["audioMic"]]) / 1000 - med(chunk):.1f} ms beyond it at the median. App audio is stamped with when
the sink plays the chunk's first sample, the cycle's start, so its latency is only the wait for
broadcastd's loop (which PipeWire's thread wakes through an eventfd as it queues each buffer) and the
way to the handler. broadcastd with audio against GStreamer:
{med(extra) / med(gst) if med(gst) else float("nan"):.2f}× the CPU for the same two streams (GStreamer only drops them; broadcastd
also stamps, queues and sends them to a handler). PipeWire screen capture is measured in its own section.
<!-- audio-end -->
"""
write_section(doc, "<!-- audio-begin -->", "<!-- audio-end -->", section)
print(section)
PY
