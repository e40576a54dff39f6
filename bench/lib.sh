# Shared by bench/run.sh and bench/x11.sh: paths, tools, the release build, /proc readers.
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$ROOT/.build-bench"   # its own scratch path, never the default .build
BIN="$SCRATCH/release"
DOC="$ROOT/docs/benchmarks.md"
. "$ROOT/scripts/lib.sh"

# The project's packages plus the peers measured against and /usr/bin/time.
ensure_bench_tools() {
    ensure_packages "${BROADCASTD_PACKAGES[@]}" ffmpeg gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good time
    ensure_swift
}

# A release build as the demo makes it (Swift runtime linked in).
build_release() {
    log "building release into $SCRATCH"
    for attempt in 1 2 3; do   # a source edited mid-build ("modified during the build") is worth a retry
        if (cd "$ROOT" && swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH" >"/tmp/broadcastd-bench-build.log" 2>&1); then return 0; fi
        tail -n 5 /tmp/broadcastd-bench-build.log >&2
        ((attempt < 3)) || { log "build failed"; exit 1; }
        sleep 5
    done
}

# utime+stime and cutime+cstime (reaped children = the handler) of PID, in clock ticks.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12+$13, $14+$15}'; }
# utime+stime of PID, in clock ticks.
ticks() { cpu_ticks "$1" | cut -d' ' -f1; }
# A field of /proc/PID/status in kB, or NA.
status_kb() { awk -v k="$2:" '$1==k {print $2; f=1} END {if (!f) print "NA"}' "/proc/$1/status"; }

# Background processes a script started and has not yet seen end (its cleanup stops them): spawn starts
# one and leaves its PID in $LAST, reap waits for one and forgets it.
PIDS=()
forget() { local p keep=(); for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done; PIDS=("${keep[@]}"); }
spawn() { "$@" & LAST=$!; PIDS+=("$LAST"); }
reap() { local rc=0; wait "$1" || rc=$?; forget "$1"; return "$rc"; }

# bench_work NAME: a fresh $WORK under /tmp with a private XDG_RUNTIME_DIR, removed on exit after
# every spawned process (and its children) is stopped.
bench_work() {
    WORK="$(mktemp -d "/tmp/broadcastd-bench-$1.XXXXXX")"
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    export XDG_RUNTIME_DIR="$WORK/xdg"; mkdir -m 700 -p "$XDG_RUNTIME_DIR"
}
bench_cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}

# bench_report RESULTS SECONDS REPEATS <<'PY' … PY: runs a report (Python on stdin, bench/ on its path) with sys.argv[1:]
# RESULTS, the docs file, SECONDS, REPEATS, what was run (a release build or BENCH_BIN's), the date, the commit, the
# number of cores and the load average.
bench_report() {
    local build
    build=$([ -n "${BENCH_BIN:-}" ] && echo "the binaries in ${BENCH_BIN#"$ROOT/"}" || echo "a release build")
    PYTHONPATH="$ROOT/bench" /usr/bin/python3 - "$1" "$DOC" "$2" "$3" "$build" "$(date -u '+%Y-%m-%d %H:%M UTC')" \
        "$(git -C "$ROOT" rev-parse --short HEAD)" "$(nproc)" "$(uptime | sed 's/.*load average: //')"
}
