#!/usr/bin/env bash
# Benchmarks the `stream` handler at 1080p30 over SRT on loopback: glass-to-receiver latency (sync-mark
# frames of the synthetic source, stamped on arrival by a decoding receiver), the handler's CPU and peak
# RSS; and ffmpeg encoding the same size, rate and x264 settings to the same kind of receiver.
# Writes the stream section of docs/benchmarks.md. One command: bash bench/stream.sh
# (bench/run.sh runs it too, unless BENCH_SKIP_STREAM=1).
#
# Then, against ffmpeg on a private Xvfb (with a private PipeWire stack: audio on, as users run it):
#   g2g        glass-to-glass latency: a white flash over the X screen (bench/flasher.py) to the first bright frame
#              an SRT receiver decodes, both on CLOCK_MONOTONIC; ours (broadcastd x11 + the stream handler) and
#              ffmpeg x11grab → libx264 zerolatency → SRT, the same SRT latency; p50/p99
#   simulcast  CPU of broadcastd + handler streaming to 1 and to 3 SRT listeners (one encode, `also`), against
#              1 and 3 ffmpeg processes
#   whip       glass-to-glass over WebRTC: ours to the tests' WHIP endpoint (webrtcbin, openh264dec) beside ours over
#              SRT with encode=own (encoding in the handler, as WHIP's stream does), interleaved; the handler's CPU in each: over the whole broadcast, in its first BENCH_WHIP_SETTLE
#              (4) s (connecting: for WebRTC, GStreamer's DTLS certificate, ICE and DTLS) and after them
# Writes the glass-to-glass and simulcast section of docs/benchmarks.md, and the WHIP one.
# Knobs (environment): BENCH_STREAM_SECONDS (20), BENCH_STREAM_REPEATS (3) for the synthetic part;
# BENCH_STREAM_PARTS ("synthetic g2g simulcast whip"), BENCH_G2G_SECONDS (20), BENCH_SIMULCAST_SECONDS (15),
# BENCH_G2G_REPEATS (2), BENCH_G2G_TOOLS ("ours ffmpeg ours-noaudio ours-own": which glass-to-glass runs), BENCH_G2G_SIZE (1280x720), BENCH_SRT_LATENCY_US (120000), BENCH_LOAD_NOTE (text
# appended to the machine's description, e.g. ", loaded by other builds").
# BENCH_DEBUG_DIR: where to copy each glass-to-glass run's frames and flashes (JSON), to look at them.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_STREAM_SECONDS:-20}"
REPEATS="${BENCH_STREAM_REPEATS:-3}"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
TOOLS="$ROOT/bench/stream_tools.py"

log() { printf '[bench stream] %s\n' "$*" >&2; }
ensure_bench_tools
build_release

bench_work stream
RESULTS="$WORK/results.tsv"; : >"$RESULTS"
HZ=$(getconf CLK_TCK)
free_tcp_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
free_udp_port() { "$PY" -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run_ours() {
    local rep=$1 port sock="$WORK/bd.sock" logf="$WORK/broadcastd-$1.log"
    port=$(free_udp_port); rm -f "$sock"
    spawn "$PY" "$TOOLS" receive "$port" "$WORK/frames-$rep.json"; local receiver=$LAST
    spawn "$BIN/broadcastd" --config /dev/null --source synthetic --size 1920x1080 --fps 30 --sync-marks --socket "$sock" \
        --handlers-dir "$ROOT/share/broadcastd/handlers" --log-level warning 2>"$logf"
    local bd=$LAST
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    [[ -S $sock ]] || { log "broadcastd did not start"; cat "$logf" >&2; exit 1; }
    spawn "$PY" "$TOOLS" watch "$bd" "$WORK/watch-$rep.json"; local watcher=$LAST
    sleep 0.5   # the receiver listens
    spawn "$BIN/broadcastctl" start --socket "$sock" --handler stream --url "srt://127.0.0.1:$port" --duration "$T" --wait --json >"$WORK/ctl-$rep.out"
    local ctl=$LAST live err
    read -r live err < <("$PY" "$TOOLS" livestart "$sock" "$BIN")
    reap "$ctl" || { log "the broadcast failed:"; cat "$WORK/ctl-$rep.out" >&2; tail -n 20 "$logf" >&2; exit 1; }
    reap "$receiver" || true
    sleep 0.3; kill -TERM "$bd"; reap "$bd" || true
    kill -TERM "$watcher" 2>/dev/null || true; reap "$watcher" || true
    local lat ticks hwm
    lat=$("$PY" "$TOOLS" latencies "$WORK/frames-$rep.json" "$live")
    read -r ticks hwm < <("$PY" -c 'import json,sys; w=json.load(open(sys.argv[1])); print(w.get("ticks", 0), w.get("hwm_kb", 0))' "$WORK/watch-$rep.json")
    echo "tool=ours rep=$rep seconds=$T cpu_s=$(awk -v t="$ticks" -v hz="$HZ" 'BEGIN{print t/hz}') rss_mb=$(awk -v k="$hwm" 'BEGIN{print k/1024}') livestart_err_ms=$err latencies=$lat" >>"$RESULTS"
    log "ours $rep: latencies (ms) $lat"
}

run_ffmpeg() {
    local rep=$1 port; port=$(free_udp_port)
    spawn "$PY" "$TOOLS" receive "$port" "$WORK/ffmpeg-frames-$rep.json"; local receiver=$LAST
    sleep 0.5
    spawn /usr/bin/time -v -o "$WORK/ffmpeg-$rep.time" ffmpeg -v error -re -f lavfi -i "testsrc2=size=1920x1080:rate=30" \
        -f lavfi -i "sine=frequency=440:sample_rate=48000" -t "$T" -pix_fmt nv12 -c:v libx264 -preset veryfast -tune zerolatency \
        -b:v 4500k -maxrate 4500k -bufsize 4500k -g 60 -bf 0 -c:a libopus -b:a 128k -ac 2 -f mpegts "srt://127.0.0.1:$port"
    reap "$LAST" || { log "ffmpeg failed"; exit 1; }
    reap "$receiver" || true
    local cpu rss
    cpu=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u+s}' "$WORK/ffmpeg-$rep.time")
    rss=$(awk -F': ' '/Maximum resident/ {print $2/1024}' "$WORK/ffmpeg-$rep.time")
    echo "tool=ffmpeg rep=$rep seconds=$T cpu_s=$cpu rss_mb=$rss latencies=" >>"$RESULTS"
    log "ffmpeg $rep: $cpu s CPU, $rss MB"
}

PARTS="${BENCH_STREAM_PARTS:-synthetic g2g simulcast whip}"
if [[ " $PARTS " == *" synthetic "* ]]; then
    for rep in $(seq "$REPEATS"); do
        run_ours "$rep"
        run_ffmpeg "$rep"
    done
    "$PY" "$TOOLS" report "$RESULTS" "$DOC"
fi
if [[ " $PARTS " == *" g2g "* || " $PARTS " == *" simulcast "* || " $PARTS " == *" whip "* ]]; then
    . "$ROOT/bench/stream_x11.sh"
fi
