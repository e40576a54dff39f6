#!/usr/bin/env bash
# What an always-on broadcast costs while nothing happens, measured (not a CI test). A private 1920x1080 Xvfb with a
# quiet desktop (twm, xclock ticking once a second; nothing else moves, no pointer), another with the same desktop
# standing still (the clock drawn once, an hour between ticks: the issue's "screen unchanged"), and a private
# PipeWire stack whose default sink and microphone play silence (scripts/lib.sh start_pipewire DIR silence).
# broadcastd, the release build as `make` builds it, captures the screen at 30 fps with both audio streams for the
# replay handler (length=30) and for the record handler, each for BENCH_QUIET_SECONDS (30) from 3 s after it went
# live; beside each, the same broadcast of the moving pattern (--source synthetic, 1920x1080 at 30 fps, every frame
# new, with its two tones). For each: broadcastd's and the handler's CPU as a share of one core over that window
# (utime+stime in /proc), the median of BENCH_REPEATS (3) rounds, each on a fresh daemon. Writes the quiet-screen
# section of docs/benchmarks.md. BENCH_BIN: binaries already built (a debug build's, say) instead of the release
# build.
# One command: bash bench/quiet.sh
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_QUIET_SECONDS:-30}"
REPEATS="${BENCH_REPEATS:-3}"
HZ=$(getconf CLK_TCK)
log() { printf '[bench quiet] %s\n' "$*" >&2; }
if [ -n "${BENCH_BIN:-}" ]; then BIN=$BENCH_BIN; else ensure_bench_tools; build_release; fi

bench_work quiet
start_pipewire "$WORK/pipewire" silence
PIDS+=("${PIPEWIRE_PIDS[@]}")
# twm needs a font it can open (the core font "fixed"), or it manages nothing.
fonts=""; for f in TitleFont ResizeFont MenuFont IconFont IconManagerFont; do fonts+="$f \"fixed\""$'\n'; done
printf 'UsePPosition "on"\nRandomPlacement\nNoGrabServer\n%s' "$fonts" >"$WORK/twmrc"
# desktop UPDATE: a display with twm and an xclock redrawn every UPDATE seconds; its number in DESKTOP.
desktop() {
    local n; n=$(free_display)
    start_xvfb "$n" 1920x1080
    PIDS+=("$XVFB_PID")
    spawn twm -display ":$n" -f "$WORK/twmrc" 2>/dev/null
    sleep 0.3
    spawn xclock -display ":$n" -update "$1" -geometry 150x150-20+20 2>/dev/null
    sleep 0.8
    DESKTOP=$n
}
desktop 1; n=$DESKTOP
desktop 3600; still=$DESKTOP
results="$WORK/results.txt"
: >"$results"


# run SCENE HANDLER ROUND: a fresh daemon, one broadcast to HANDLER; "scene handler daemon% handler%" into $results.
run() {
    local scene=$1 handler=$2 round=$3 sock="$WORK/bd.sock" source=(--source x11 --display ":$n")
    [ "$scene" = moving ] && source=(--source synthetic --size 1920x1080)
    [ "$scene" = still ] && source=(--source x11 --display ":$still")
    rm -f "$sock"
    spawn "$BIN/broadcastd" --config /dev/null "${source[@]}" --fps 30 --socket "$sock" \
        --handlers-dir "$ROOT/share/broadcastd/handlers" --log-level warning 2>"$WORK/bd-$scene-$handler-$round.log"
    local bd=$LAST
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    local sets=(--set length=30) url=()
    [ "$handler" = record ] && sets=() url=(--url "file://$WORK/quiet.mkv")
    "$BIN/broadcastctl" start --socket "$sock" --handler "$handler" "${url[@]}" "${sets[@]}" >/dev/null
    local child; child=$(pgrep -P "$bd" | head -n 1) # the handler, broadcastd's only child
    if [ -z "$child" ]; then
        log "no handler process under broadcastd $bd"; cat "$WORK/bd-$scene-$handler-$round.log" >&2; exit 1
    fi
    sleep 3
    local d0 h0 d1 h1; d0=$(ticks "$bd"); h0=$(ticks "$child")
    sleep "$T"
    d1=$(ticks "$bd"); h1=$(ticks "$child")
    "$BIN/broadcastctl" stop --socket "$sock" >/dev/null 2>&1
    kill -TERM "$bd"; reap "$bd" || true
    rm -f "$WORK/quiet.mkv"
    awk -v s="$scene" -v h="$handler" -v d=$((d1 - d0)) -v c=$((h1 - h0)) -v hz="$HZ" -v t="$T" \
        'BEGIN { printf "%s %s %.2f %.2f\n", s, h, d * 100 / hz / t, c * 100 / hz / t }' >>"$results"
}

for round in $(seq "$REPEATS"); do
    for handler in replay record; do
        for scene in still quiet moving; do
            log "round $round: $handler, $scene screen, $T s"
            run "$scene" "$handler" "$round"
        done
    done
done
cat "$results" >&2

bench_report "$results" "$T" "$REPEATS" <<'PY'
import statistics, sys
from docsection import write_section
results, doc, seconds, repeats, build, date, commit, cores, load = sys.argv[1:]
rows = {}
for line in open(results):
    scene, handler, daemon, child = line.split()
    rows.setdefault((handler, scene), []).append((float(daemon), float(child)))
table = []
for handler in ("replay", "record"):
    for scene in ("still", "quiet", "moving"):
        runs = rows.get((handler, scene), [])
        if not runs:
            continue
        d = statistics.median(r[0] for r in runs)
        c = statistics.median(r[1] for r in runs)
        what = {"still": "desktop standing still, silence", "quiet": "quiet desktop (a clock ticking), silence",
                "moving": "moving pattern, two tones"}[scene]
        table.append(f"| {handler} | {what} | {d:.2f} | {c:.2f} | {d + c:.2f} | "
                     f"{', '.join(f'{a + b:.2f}' for a, b in runs)} |")
section = f"""<!-- quiet-begin -->
## A quiet screen: what an always-on broadcast costs while nothing happens

Taken with `bash bench/quiet.sh` on {date} (commit {commit}, {build}; {cores} cores, load
average at the end {load}). A 1920x1080 Xvfb desktop standing still (twm, an xclock drawn once: the
issue's "screen unchanged") and a quiet one (the same, the clock ticking once a second) captured at
30 fps with app audio and the microphone from a private PipeWire stack playing silence into both, to
the replay handler (length=30) and to the record handler; beside
each, the same broadcast of the moving pattern (`--source synthetic`, every frame new, two tones).
CPU as a share of one core (utime+stime from /proc) over {seconds} s from 3 s after the broadcast
went live, the median of {repeats} rounds, each on a fresh daemon; the last column lists each round's
total. The moving pattern's encoder wants about a core, so its figures fall with the machine's load.

| handler | screen and sound | broadcastd (%) | handler (%) | together (%) | rounds, together (%) |
|---|---|---|---|---|---|
{chr(10).join(table)}
<!-- quiet-end -->
"""
write_section(doc, "<!-- quiet-begin -->", "<!-- quiet-end -->", section)
print(section)
PY
