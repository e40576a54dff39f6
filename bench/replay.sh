#!/usr/bin/env bash
# Benchmarks the `replay` handler against `record` on the same input: the synthetic source at 1920x1080, 30 fps,
# with its two audio streams (a moving pattern and two tones; every frame new, so every frame is encoded), the
# release build as `make` builds it, each handler at its defaults (H.264 veryfast/zerolatency crf 23, two Opus
# tracks).
#
#   record  one broadcast of BENCH_REPLAY_SECONDS to the record handler (a fragmented MP4 file)
#   replay  one broadcast of BENCH_REPLAY_SECONDS to the replay handler with length=BENCH_REPLAY_LENGTH; once the
#           buffer is full, BENCH_REPLAY_SAVES saves of all of it, a few seconds apart, each timed from
#           `broadcastctl save` to its answer (sent when the file is closed) and as the handler measured it
#
# For each: the handler's CPU (its utime+stime, from broadcastd's cutime+cstime once it has reaped it) as a share of
# one core over the broadcast, its peak RSS (VmHWM, polled), frames delivered and dropped; for the saves: the time,
# the clip's duration and size. Prints a Markdown table (docs/benchmarks.md, "Replay", holds the last one taken).
#
# One command: bash bench/replay.sh. Knobs (environment): BENCH_REPLAY_SECONDS (600), BENCH_REPLAY_LENGTH (120),
# BENCH_REPLAY_SAVES (3), BENCH_REPLAY_SIZE (1920x1080).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_REPLAY_SECONDS:-600}"
LENGTH="${BENCH_REPLAY_LENGTH:-120}"
SAVES="${BENCH_REPLAY_SAVES:-3}"
SIZE="${BENCH_REPLAY_SIZE:-1920x1080}"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
TOOLS="$ROOT/bench/record_tools.py"
HZ=$(getconf CLK_TCK)

log() { printf '[bench replay] %s\n' "$*" >&2; }
(( T >= LENGTH + 10 )) || { log "BENCH_REPLAY_SECONDS ($T) must be at least BENCH_REPLAY_LENGTH ($LENGTH) + 10"; exit 64; }
ensure_bench_tools
build_release
for p in broadcastd broadcastctl broadcast-handler-record broadcast-handler-replay; do
    [ -x "$BIN/$p" ] || { log "no $BIN/$p after the build"; exit 1; }
done
bench_work replay
RESULTS="$WORK/results.txt"; : >"$RESULTS"

# run HANDLER SETUP...: one fresh daemon, one broadcast of $T seconds to HANDLER; the replay handler is saved
# $SAVES times once its buffer is full. Appends "key=value ..." to $RESULTS.
run() {
    local handler=$1; shift
    local sock="$WORK/bd.sock" logf="$WORK/broadcastd-$handler.log" sets=() kv
    for kv in "$@"; do sets+=(--set "$kv"); done
    rm -f "$sock"
    spawn "$BIN/broadcastd" --config /dev/null --socket "$sock" --handlers-dir "$ROOT/share/broadcastd/handlers" \
        --source synthetic --size "$SIZE" --fps 30 --log-level info 2>"$logf"
    local bd=$LAST
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    [[ -S $sock ]] || { log "broadcastd did not start"; cat "$logf" >&2; exit 1; }
    spawn "$PY" "$TOOLS" watch "child:$bd" >"$WORK/watch-$handler.txt"
    local watcher=$LAST before children_before after children t0 t1
    read -r before children_before < <(cpu_ticks "$bd"); t0=$(date +%s.%N)
    local url=() ; [ "$handler" = record ] && url=(--url "file://$WORK/record.mp4")
    "$BIN/broadcastctl" start --socket "$sock" --handler "$handler" "${url[@]}" "${sets[@]}" --duration "$T" >/dev/null
    if [ "$handler" = replay ]; then
        sleep $((T - 5 * SAVES - 5))
        local i
        for i in $(seq "$SAVES"); do
            local s0 s1
            s0=$(date +%s.%N)
            "$BIN/broadcastctl" save --socket "$sock" --json "$WORK/save-$i.mp4" >"$WORK/save-$i.json"
            s1=$(date +%s.%N)
            printf 'save=%s client_ms=%s %s\n' "$i" "$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.1f", (b - a) * 1000}')" \
                "$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; print(" ".join(f"{k}={r[k]}" for k in ("milliseconds","duration","bytes","videoFrames")))' "$WORK/save-$i.json")" >>"$WORK/saves.txt"
            rm -f "$WORK/save-$i.mp4"
            sleep 5
        done
    fi
    # The broadcast finishes by itself after $T s of live time.
    for _ in $(seq $((T * 20 + 1200))); do
        "$BIN/broadcastctl" status --socket "$sock" --json >"$WORK/status.json" 2>/dev/null || true
        grep -q '"state" : "finished"' "$WORK/status.json" && break
        sleep 0.5
    done
    t1=$(date +%s.%N)
    for _ in $(seq 100); do [ -z "$(cat /proc/"$bd"/task/*/children 2>/dev/null)" ] && break; sleep 0.05; done
    sleep 0.3; kill -TERM "$watcher" 2>/dev/null || true; reap "$watcher" || true
    read -r after children < <(cpu_ticks "$bd")
    kill -TERM "$bd"; reap "$bd" || true
    "$PY" - "$WORK/status.json" "$WORK/watch-$handler.txt" "$handler" "$HZ" "$((children - children_before))" "$t0" "$t1" <<'PY' >>"$RESULTS"
import json, sys
status, watch, handler, hz, children, t0, t1 = sys.argv[1:]
s = json.load(open(status))
w = dict(p.split("=", 1) for p in open(watch).read().split())
video = s["streams"]["video"]
live = s.get("elapsed") or (float(t1) - float(t0))
print(f"handler={handler} live_s={live:.1f} cpu_s={int(children) / int(hz):.1f} cpu_pct={int(children) / int(hz) * 100 / live:.1f} "
      f"rss_mb={int(w['VmHWM']) / 1024:.1f} delivered={video['delivered']} dropped={video['dropped']} late={video.get('late', 0)} "
      f"error={(s.get('error') or {}).get('message', 'none').replace(' ', '_')}")
PY
}

log "record: $T s of $SIZE at 30 fps"
run record
log "replay: $T s of $SIZE at 30 fps, length=$LENGTH, $SAVES saves"
run replay "length=$LENGTH"
cat "$RESULTS" "$WORK/saves.txt" >&2
"$PY" - "$RESULTS" "$WORK/saves.txt" "$T" "$LENGTH" "$SIZE" "$(nproc)" "$(uptime | sed 's/.*load average: //')" <<'PY'
import sys
results, saves, t, length, size, cores, load = sys.argv[1:]
rows = [dict(p.split("=", 1) for p in line.split()) for line in open(results)]
print(f"{size} at 30 fps from the synthetic source (two audio streams), {t} s per handler, replay length={length}; "
      f"{cores} cores, load average at the end {load}.\n")
print("| handler | CPU (% of a core) | peak RSS (MiB) | frames delivered | dropped (late) |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['handler']} | {r['cpu_pct']} | {r['rss_mb']} | {r['delivered']} | {r['dropped']} ({r['late']}) |")
print("\n| save | broadcastctl save → answer (ms) | in the handler (ms) | clip (s) | clip (MiB) | frames |")
print("|---|---|---|---|---|---|")
for line in open(saves):
    r = dict(p.split("=", 1) for p in line.split())
    print(f"| {r['save']} | {float(r['client_ms']):.0f} | {float(r['milliseconds']):.0f} | {float(r['duration']):.1f} | "
          f"{float(r['bytes']) / 1048576:.1f} | {int(float(r['videoFrames']))} |")
PY
