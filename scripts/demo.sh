#!/usr/bin/env bash
# The main job: a demo broadcast of a real X11 screen with app audio and the microphone from PipeWire.
# When there is no display (DISPLAY unset), a private 1920x1080 Xvfb is started with a clock on it and
# a pointer that moves; when no PipeWire runs, a private one playing two tones. broadcastd runs on a
# private socket and captures it through XCB-SHM; the inspect handler receives 6 s of broadcast with
# a pause in the middle, writes what it received to broadcastd-demo/summary.json, and
# `broadcastctl snapshot` saves the frame on screen mid-broadcast as broadcastd-demo/frame.png. Then the record handler records 6 s,
# again with a pause, to broadcastd-demo/recording.mp4 (H.264 and two Opus tracks, fragmented MP4), which
# ffprobe describes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_packages "${BROADCASTD_PACKAGES[@]}"
ensure_swift

echo "==> building (release)" >&2
swift build -c release --static-swift-stdlib   # the Swift runtime linked in: 5 MB less resident than shared
bin=$(swift build -c release --static-swift-stdlib --show-bin-path)

out=$PWD/broadcastd-demo
mkdir -p "$out"
runtime=$(mktemp -d)
chmod 700 "$runtime"
socket=$runtime/broadcastd.sock
daemon= XVFB_PID= clients=() PIPEWIRE_PIDS=()
cleanup() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    for pid in "${clients[@]}" "${PIPEWIRE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${clients[@]}" "${PIPEWIRE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    [ -n "$XVFB_PID" ] && kill "$XVFB_PID" 2>/dev/null && wait "$XVFB_PID" 2>/dev/null
    rm -rf "$runtime"
}
trap cleanup EXIT

if [ -z "${DISPLAY:-}" ]; then
    n=$(free_display)
    start_xvfb "$n" 1920x1080
    export DISPLAY=:$n
    echo "==> no display: started a private Xvfb on $DISPLAY (1920x1080) with xclock on it" >&2
    xsetroot -solid '#30506e'
    xclock -update 1 -geometry 400x400+760+340 2>/dev/null &
    clients+=($!)
else
    echo "==> capturing your display $DISPLAY" >&2
fi

if [ -S "${PIPEWIRE_RUNTIME_DIR:-${XDG_RUNTIME_DIR:-/nonexistent}}/pipewire-0" ]; then
    echo "==> app audio and the microphone from your PipeWire session" >&2
else
    start_pipewire "$runtime/pipewire"
    echo "==> no PipeWire: started a private one; its default sink plays 440 Hz (app audio), its default source carries 880 Hz (the microphone)" >&2
fi

"$bin/broadcastd" --config /dev/null --source x11 --fps 30 --socket "$socket" \
    --handlers-dir share/broadcastd/handlers 2>"$out/broadcastd.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
export BROADCASTD_SOCKET=$socket
ctl() { "$bin/broadcastctl" "$@"; }

echo "==> handlers installed" >&2
ctl handlers
echo "==> what can be captured" >&2
ctl sources
echo "==> broadcasting 6 s to the inspect handler, paused for 1 s after 2 s" >&2
rm -f "$out/summary.json" "$out/frame.png"
ctl start --handler inspect --url "file://$out/summary.json" --duration 6 --wait &
waiter=$!
# The pointer sweeps across the screen for the first seconds (only on the private display).
if [ -n "$XVFB_PID" ]; then
    (for x in $(seq 100 40 1800); do xdotool mousemove "$x" 540; sleep 0.05; done) &
    clients+=($!)
fi
sleep 2; ctl snapshot "$out/frame.png"
sleep 0.5; ctl pause; ctl status; sleep 1; ctl resume
wait $waiter
ctl status

python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("\n==> what the handler received (from %s)" % sys.argv[1])
print("callbacks:", " → ".join(c["callback"] + (" ×%d" % c["count"] if c.get("count") else "") for c in s["callbacks"]))
for name, st in sorted(s["streams"].items()):
    span = (st["lastPts"] - st["firstPts"]) / 1e9
    gaps = ", ".join("%.2f s%s" % (g["seconds"], " (flagged)" if g["discontinuity"] else "") for g in st["gaps"]) or "none"
    lat = st.get("latencyMicroseconds") or {}
    print("%-9s %4d samples over %.2f s, dropped %d, gaps: %s, latency p50 %s µs p99 %s µs"
          % (name, st["count"], span, st["sequenceGaps"], gaps, lat.get("p50"), lat.get("p99")))
print("video: %d of the frames repeated the one before (the screen did not change)" % s["repeatedFrames"])
PY

echo "==> what ffprobe finds in the snapshot $out/frame.png"
ffprobe -v error -show_entries stream=codec_name,width,height,pix_fmt -of default=noprint_wrappers=1 "$out/frame.png"

echo "==> recording 6 s to $out/recording.mp4 with the record handler, paused for 1 s after 2 s" >&2
rm -f "$out/recording.mp4"
ctl start --handler record --url "file://$out/recording.mp4" --duration 6 --wait &
waiter=$!
if [ -n "$XVFB_PID" ]; then
    (for x in $(seq 1800 -40 100); do xdotool mousemove "$x" 700; sleep 0.05; done) &
    clients+=($!)
fi
sleep 2.5; ctl pause; sleep 1; ctl resume
wait $waiter
echo "==> what ffprobe finds in $out/recording.mp4"
ffprobe -v error -show_entries format=format_name,duration,size:stream=codec_name,width,height,avg_frame_rate \
    -of default=noprint_wrappers=1 "$out/recording.mp4"
echo "==> the audio tracks of $out/recording.mp4, decoded by ffmpeg"
for track in 0 1; do
    ffmpeg -v error -i "$out/recording.mp4" -map "0:a:$track" -ac 1 -f f32le - | python3 -c '
import array, math, sys
name = sys.argv[1]
samples = array.array("f", sys.stdin.buffer.read())[48000:]   # from the second second on
if not samples:
    print(f"{name}: no audio"); sys.exit()
crossings = sum(1 for a, b in zip(samples, samples[1:]) if a < 0 <= b)
rms = math.sqrt(sum(x * x for x in samples) / len(samples))
level = "silent" if rms < 1e-4 else f"{20 * math.log10(rms):.1f} dBFS"
print(f"{name}: {crossings * 48000 / len(samples):.0f} Hz, {level}")' "$([ $track = 0 ] && echo "app audio" || echo "microphone")"
done
