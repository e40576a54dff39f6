#!/usr/bin/env bash
# broadcastd's memory at its defaults (no --memory-budget), as users run it: the release build, PipeWire audio on
# (a private PipeWire stack playing a tone into the default sink and another into the default source), the record
# handler. For each screen:
#   X11     Xvfb at 1920x1080, 2560x1440 and 3840x2160 with a ticking clock and a terminal scrolling a log
#           (five lines every 100 ms), 30 fps;
#           and at 1920x1080 three broadcasts at once (record, replay, inspect) on the one capture;
#   portal  the tests' stand-in portal (Tests/fixtures/portal) sharing the tests' video source, which offers its
#           buffers as xdg-desktop-portal-wlr does (two BGRx buffers in shared memory) and stamps each frame, at the
#           same sizes, 10 new frames a second captured at 30 fps;
# broadcastd idle (before any broadcast) with its resident memory broken down from /proc/PID/smaps, then a
# broadcast of BENCH_MEMORY_SECONDS (10): the plan it made for the capture (status `memoryPlanned`, and its warning
# when over the budget) beside its peak resident memory (VmHWM), and the frames dropped. Writes the "Memory at the
# defaults" section of docs/benchmarks.md. One command: bash bench/memory.sh (bench/run.sh runs it too).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_MEMORY_SECONDS:-10}"
SIZES="${BENCH_MEMORY_SIZES:-1920x1080 2560x1440 3840x2160}"
log() { printf '[bench memory] %s\n' "$*" >&2; }
ensure_bench_tools
ensure_packages xterm python3-dbus python3-gi
build_release

bench_work memory
start_pipewire "$WORK/pipewire"
PIDS+=("${PIPEWIRE_PIDS[@]}")
export PIPEWIRE_REMOTE="$WORK/pipewire/pipewire-0"
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"

# start_daemon NAME ARGS...: broadcastd at its defaults on a socket of its own; sets BD and SOCK.
start_daemon() {
    local name=$1; shift
    SOCK="$WORK/$name.sock"
    spawn "$BIN/broadcastd" --config /dev/null --socket "$SOCK" --handlers-dir "$ROOT/share/broadcastd/handlers" --no-notify \
        --log-level info "$@" 2>"$WORK/$name.log"
    BD=$LAST
    for _ in $(seq 200); do [[ -S $SOCK ]] && return 0; sleep 0.05; done
    log "broadcastd did not start"; cat "$WORK/$name.log" >&2; exit 1
}

# status_json: broadcastd's status, as JSON.
status_json() { "$BIN/broadcastctl" status --socket "$SOCK" --json; }

# measure NAME KIND SIZE HANDLERS...: idle breakdown, then one broadcast per handler (the first records), T s.
measure() {
    local name=$1 kind=$2 size=$3; shift 3
    sleep 2
    python3 "$ROOT/bench/memory_report.py" smaps "$BD" >"$WORK/$name.idle.json"
    local ctls=() handler
    for handler in "$@"; do
        local url=()
        case $handler in
            record) url=(--url "file://$WORK/$name.mkv") ;;
            inspect) url=(--url "file://$WORK/$name-inspect.json") ;;
        esac
        "$BIN/broadcastctl" start --socket "$SOCK" --handler "$handler" "${url[@]}" --duration "$T" --wait \
            >"$WORK/$name-$handler.out" 2>&1 &
        ctls+=($!)
        sleep 0.5
    done
    sleep "$(python3 -c "print($T / 2)")"
    status_json >"$WORK/$name.live.json"
    # Every broadcast's frames, read until its handler is gone (a finished broadcast leaves the status with it).
    local ctl polls="$WORK/$name.polls" n=0
    mkdir -p "$polls"
    while pgrep -P "$BD" >/dev/null; do status_json >"$polls/$((n++)).json" 2>/dev/null || true; sleep 0.2; done
    for ctl in "${ctls[@]}"; do wait "$ctl" || true; done
    status_json >"$polls/$n.json"
    python3 "$ROOT/bench/memory_report.py" row "$name" "$kind" "$size" "$#" "$(status_kb "$BD" VmHWM)" \
        "$WORK/$name.idle.json" "$WORK/$name.live.json" "$polls" >>"$RESULTS"
    kill -TERM "$BD"; reap "$BD" || true
}

START=$(date +%s)
for size in $SIZES; do
    n=$(free_display); start_xvfb "$n" "$size"; export DISPLAY=:$n
    PIDS+=("$XVFB_PID")
    spawn xclock -update 1 -geometry 300x300+100+100; clock=$LAST
    # A terminal showing a log as it grows: five lines every 100 ms (as fast as xterm can print would be Xvfb and
    # xterm taking a core of their own, measuring them rather than broadcastd and its handler).
    spawn xterm -geometry 160x50+500+100 -e sh -c 'while :; do ls -l /usr/lib/x86_64-linux-gnu | head -n 5; sleep 0.1; done'
    term=$LAST
    log "X11 $size"
    start_daemon "x11-$size" --source x11 --display ":$n" --fps 30
    measure "x11-$size" x11 "$size" record
    if [[ $size == 1920x1080 ]]; then
        log "X11 $size, three broadcasts"
        start_daemon "x11-three" --source x11 --display ":$n" --fps 30
        measure "x11-three" x11-three "$size" record replay inspect
    fi
    for pid in "$term" "$clock" "$XVFB_PID"; do kill "$pid" 2>/dev/null || true; reap "$pid" || true; done
    XVFB_PID=
done

export DBUS_SESSION_BUS_ADDRESS="unix:path=$WORK/pipewire/bus"
for size in $SIZES; do
    log "portal $size"
    spawn "$BIN/pipewire-test-video-source" --name "screen-$size" --size "$size" --fps 10 --latency 20; source=$LAST
    for _ in $(seq 100); do pw-cli ls Node 2>/dev/null | grep -q "node.name = \"screen-$size\"" && break; sleep 0.1; done
    spawn /usr/bin/python3 "$ROOT/Tests/fixtures/portal/screencast_portal.py" --node "screen-$size" --log "$WORK/portal-$size.jsonl"; portal=$LAST
    for _ in $(seq 100); do
        dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner \
            string:org.freedesktop.portal.Desktop 2>/dev/null | grep -q true && break
        sleep 0.1
    done
    XDG_STATE_HOME="$WORK/state-$size" start_daemon "portal-$size" --source pipewire --fps 30
    measure "portal-$size" portal "$size" record
    for pid in "$portal" "$source"; do kill "$pid" 2>/dev/null || true; reap "$pid" || true; done
done
ELAPSED=$(($(date +%s) - START))

export BENCH_CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" BENCH_NPROC="$(nproc)"
export BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" BENCH_ELAPSED="$ELAPSED" BENCH_SECONDS="$T"
export BENCH_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- Sources 2>/dev/null || echo ' (+ uncommitted changes in Sources/)')"
python3 "$ROOT/bench/memory_report.py" write "$RESULTS" "$DOC"
log "wrote the memory section of $DOC (measurements took ${ELAPSED} s)"
cat "$RESULTS" >&2
