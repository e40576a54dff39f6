#!/usr/bin/env bash
# The main job: a demo broadcast. broadcastd runs on a private socket with its built-in synthetic
# source (1080p30 test pattern, 440 Hz app audio, 880 Hz mic audio); the inspect handler receives
# 6 s of broadcast with a pause in the middle and writes what it received to broadcastd-demo/summary.json.
# (With the X11 and PipeWire backends, the same demo will capture the real screen when there is one.)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_packages "${BROADCASTD_PACKAGES[@]}"
ensure_swift

echo "==> building (release)" >&2
swift build -c release
bin=$(swift build -c release --show-bin-path)

out=$PWD/broadcastd-demo
mkdir -p "$out"
runtime=$(mktemp -d)
chmod 700 "$runtime"
socket=$runtime/broadcastd.sock
daemon=
cleanup() {
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    rm -rf "$runtime"
}
trap cleanup EXIT

"$bin/broadcastd" --source synthetic --size 1920x1080 --fps 30 --socket "$socket" \
    --handlers-dir share/broadcastd/handlers 2>"$out/broadcastd.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
export BROADCASTD_SOCKET=$socket
ctl() { "$bin/broadcastctl" "$@"; }

echo "==> handlers installed" >&2
ctl handlers
echo "==> broadcasting 6 s to the inspect handler, paused for 1 s after 2 s" >&2
rm -f "$out/summary.json"
ctl start --handler inspect --url "file://$out/summary.json" --duration 6 --wait &
waiter=$!
sleep 2.5; ctl pause; ctl status; sleep 1; ctl resume
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
    note = " (pts is a chunk's first sample: includes its 10 ms)" if name != "video" else ""
    print("%-9s %4d samples over %.2f s, dropped %d, gaps: %s, latency p50 %s µs p99 %s µs%s"
          % (name, st["count"], span, st["sequenceGaps"], gaps, lat.get("p50"), lat.get("p99"), note))
PY
