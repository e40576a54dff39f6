#!/usr/bin/env bash
# Benchmarks several broadcasts on one capture: 1080p30 from a private Xvfb with moving content, PipeWire
# audio on (a private stack with tones, as users run it), the default options, release binaries as `make`
# builds them. Each run is BENCH_MANY_SECONDS (60) long, BENCH_MANY_REPEATS (1) rounds, interleaved:
#   one     the record handler alone: broadcastd's CPU, and every process's
#   three   record + stream (SRT to a local srt-live-transmit) + inspect at once: broadcastd's CPU (goal: at
#           most 1.2x `one`: capture is paid once), every process's, broadcastd's peak RSS, drops per handler
#   ffmpeg  one ffmpeg process doing the same encodes: x11grab → libx264 with record's settings into an MP4
#           and libx264 with stream's settings into MPEG-TS over SRT to the same listener (goal: our total
#           at most 0.75x its CPU)
#   own     record + stream + replay at once, each encoding by itself (encode=own): three x264 encodes
#   defaults record + stream + replay at once with no setup fields: the three share one encoder (their default):
#           one x264 encode in broadcast-encoder, the three handlers muxing its packets, the stream mixing its
#           audio track from the encoder's two (goal: all our processes at most 0.55x ffmpeg's CPU, no handler
#           losing more than 1 % of its frames)
#   codec-C  record alone with its defaults but codec=C (h264, hevc, av1): the shared path, encoded in
#           broadcast-encoder, with PipeWire audio on, as users get it (goal: ≤ 1 % of the frames dropped;
#           BENCH_MANY_CODECS, default "h264 hevc av1", in the first round only; empty: none)
# Writes the "Several broadcasts" section of docs/benchmarks.md. One command: bash bench/many.sh
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_MANY_SECONDS:-60}"
REPEATS="${BENCH_MANY_REPEATS:-1}"
CODECS="${BENCH_MANY_CODECS-h264 hevc av1}"
SIZE=1920x1080
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3   # the system Python: python3-xlib is installed for it
TOOLS="$ROOT/bench/record_tools.py"

log() { printf '[bench many] %s\n' "$*" >&2; }
ensure_bench_tools
ensure_packages srt-tools python3-xlib
build_release

WORK="$(mktemp -d /tmp/broadcastd-bench-many.XXXXXX)"
PIDS=()
XVFB_PID=
PIPEWIRE_PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    for pid in "${PIPEWIRE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -n "$XVFB_PID" ] && kill "$XVFB_PID" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export XDG_RUNTIME_DIR="$WORK/xdg"; mkdir -m 700 -p "$XDG_RUNTIME_DIR"
RESULTS="$WORK/results.tsv"; : >"$RESULTS"
HZ=$(getconf CLK_TCK)

start_pipewire "$WORK/pipewire"
export PIPEWIRE_REMOTE="$WORK/pipewire/pipewire-0"
n=$(free_display); start_xvfb "$n" "$SIZE"; export DISPLAY=:$n
spawn "$PY" "$TOOLS" animate 2>"$WORK/animate.log"

# An SRT listener on a free port that throws away what it receives: a fresh one for each run (it ends
# with its connection). Sets SRT_PID.
PORT=$("$PY" -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SRT_PID=
listen_srt() {
    if [ -n "$SRT_PID" ]; then kill -INT "$SRT_PID" 2>/dev/null || true; reap "$SRT_PID" || true; fi
    spawn srt-live-transmit -q "srt://:$PORT?mode=listener" file://con >/dev/null 2>>"$WORK/srt.log"
    SRT_PID=$LAST
    sleep 0.5
}

# ours TEST REP HANDLERS...: a fresh daemon and one broadcast of T s per handler (record, stream, inspect, replay),
# started together (with the test's setup fields); CPU of the daemon (utime+stime) and of its children (the handlers
# and a shared encoder, once reaped), peak RSS, drops.
ours() {
    local test=$1 rep=$2; shift 2
    local sock="$WORK/bd.sock" logf="$WORK/broadcastd.log"
    rm -f "$sock" "$WORK/ours.mp4" "$WORK/inspect.json"
    spawn "$BIN/broadcastd" --config /dev/null --source x11 --fps 30 --socket "$sock" --log-level warning \
        --handlers-dir "$ROOT/share/broadcastd/handlers" 2>"$logf"
    local bd=$LAST
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    [[ -S $sock ]] || { log "broadcastd did not start"; cat "$logf" >&2; exit 1; }
    local before children_before after children handler ctl=() t0 t1
    read -r before children_before < <(cpu_ticks "$bd"); t0=$(date +%s.%N)
    for handler in "$@"; do
        local url=() sets=()
        case $handler in
            record) url=(--url "file://$WORK/ours.mp4") ;;
            stream) url=(--url "srt://127.0.0.1:$PORT") ;;
            inspect) url=(--url "$WORK/inspect.json") ;;
        esac
        case $test:$handler in
            # Capture paid once is measured with every handler taking frames: each encoding by itself.
            codec-*:record) sets=(--set "codec=${test#codec-}") ;;
            defaults:* | *:inspect) ;;
            *) sets=(--set encode=own) ;;
        esac
        spawn timeout $((T + 60)) "$BIN/broadcastctl" start --socket "$sock" --handler "$handler" "${url[@]}" \
            "${sets[@]}" --duration "$T" --wait >/dev/null 2>>"$WORK/ctl.err"
        ctl+=("$LAST")
    done
    for pid in "${ctl[@]}"; do reap "$pid" || { log "a broadcast failed:"; cat "$WORK/ctl.err" >&2; tail -n 20 "$logf" >&2; exit 1; }; done
    t1=$(date +%s.%N)
    for _ in $(seq 100); do [ -z "$(cat /proc/"$bd"/task/*/children 2>/dev/null)" ] && break; sleep 0.05; done
    read -r after children < <(cpu_ticks "$bd")
    local hwm; hwm=$(status_kb "$bd" VmHWM)
    "$BIN/broadcastctl" status --socket "$sock" --json >"$WORK/status.json"
    kill -TERM "$bd"; reap "$bd" || true
    "$PY" - "$WORK/status.json" "$test" "$rep" "$HZ" "$before" "$after" "$children_before" "$children" "$hwm" "$t0" "$t1" <<'PY' >>"$RESULTS"
import json, sys
status, test, rep, hz, before, after, cb, ca, hwm, t0, t1 = sys.argv[1:]
hz, wall = int(hz), float(t1) - float(t0)
s = json.load(open(status))
# Per handler, the share of its video it lost: frames dropped, or for a shared encoder's handler its packets dropped.
def lost(b):
    streams = b["streams"]
    c = streams.get("encoded") or streams["video"]
    return 100 * c["dropped"] / max(1, c["dropped"] + c["delivered"])
drops = {b["handler"].replace("-", "_"): lost(b) for b in s.get("broadcasts", [s])}
late = max((b["streams"]["video"].get("late", 0) for b in s.get("broadcasts", [s])), default=0)
daemon = (int(after) - int(before)) / hz
handlers = (int(ca) - int(cb)) / hz
fields = dict(daemon_pct=daemon * 100 / wall, handlers_pct=handlers * 100 / wall, total_pct=(daemon + handlers) * 100 / wall,
              daemon_rss_mb=int(hwm) / 1024, late=late, grabbed=s.get("capture", {}).get("framesGrabbed", 0),
              **{f"dropped_{k}": v for k, v in drops.items()})
print("ours", test, rep, " ".join(f"{k}={v}" for k, v in fields.items()))
PY
}

# ffmpeg doing the same two encodes in one process (video only: it captures no audio here, ours two Opus
# tracks per handler, so the comparison leans in ffmpeg's favour).
run_ffmpeg() {
    local rep=$1
    spawn /usr/bin/time -v -o "$WORK/ffmpeg.time" ffmpeg -hide_banner -nostdin -loglevel error \
        -f x11grab -framerate 30 -video_size "$SIZE" -draw_mouse 1 -t "$T" -i "$DISPLAY" \
        -map 0:v -c:v libx264 -preset veryfast -tune zerolatency -crf 23 -maxrate 6000k -bufsize 6000k -g 60 -pix_fmt yuv420p -y "$WORK/ffmpeg.mp4" \
        -map 0:v -c:v libx264 -preset veryfast -tune zerolatency -b:v 4500k -g 60 -pix_fmt yuv420p -f mpegts "srt://127.0.0.1:$PORT" \
        2>"$WORK/ffmpeg.log"
    reap "$LAST" || { log "ffmpeg failed:"; cat "$WORK/ffmpeg.log" >&2; exit 1; }
    "$PY" - "$WORK/ffmpeg.time" "$rep" <<'PY' >>"$RESULTS"
import re, sys
t = open(sys.argv[1], errors="replace").read()
get = lambda k: float(re.search(re.escape(k) + r"[^:]*:\s*([\d.]+)", t).group(1))
clock = next(l for l in t.splitlines() if "Elapsed (wall clock)" in l).rsplit(" ", 1)[1].split(":")
wall = sum(float(p) * 60 ** i for i, p in enumerate(reversed(clock)))
cpu = get("User time (seconds)") + get("System time (seconds)")
print("ffmpeg three", sys.argv[2], f"total_pct={cpu * 100 / wall} rss_mb={get('Maximum resident set size') / 1024}")
PY
}

START=$(date +%s)
for rep in $(seq "$REPEATS"); do
    log "round $rep/$REPEATS: record alone, ${T} s"
    ours one "$rep" record
    log "round $rep/$REPEATS: record + stream + inspect, ${T} s"
    listen_srt
    ours three "$rep" record stream inspect
    log "round $rep/$REPEATS: ffmpeg, the same two encodes, ${T} s"
    listen_srt
    run_ffmpeg "$rep"
    log "round $rep/$REPEATS: record + stream + replay, each encoding, ${T} s"
    listen_srt
    ours own "$rep" record stream replay
    log "round $rep/$REPEATS: record + stream + replay, the defaults, ${T} s"
    listen_srt
    ours defaults "$rep" record stream replay
    if [ "$rep" = 1 ]; then
        for codec in $CODECS; do
            log "round $rep/$REPEATS: record alone with codec=$codec (shared), ${T} s"
            ours "codec-$codec" "$rep" record
        done
    fi
done
ELAPSED=$(($(date +%s) - START))

export BENCH_CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" BENCH_NPROC="$(nproc)"
export BENCH_FFMPEG="$(ffmpeg -version | head -n 1 | cut -d' ' -f1-3)" BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export BENCH_ELAPSED="$ELAPSED" BENCH_SECONDS="$T" BENCH_REPEATS="$REPEATS"
export BENCH_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- Sources 2>/dev/null || echo ' (+ uncommitted changes in Sources/)')"
ROOT="$ROOT" "$PY" - "$RESULTS" "$DOC" <<'PY'
import os, statistics, sys
sys.path.insert(0, os.path.join(os.environ.get("ROOT", "."), "bench"))
results, doc = sys.argv[1:]
runs = {}
for line in open(results):
    tool, test, rep, *kv = line.split()
    runs.setdefault((tool, test), []).append({k: float(v) if v.replace(".", "", 1).replace("e-", "", 1).isdigit() else v
                                             for k, v in (p.split("=", 1) for p in kv)})
med = lambda tool, test, key: statistics.median(r[key] for r in runs[(tool, test)])
one, three = med("ours", "one", "daemon_pct"), med("ours", "three", "daemon_pct")
ours_total, ff = med("ours", "three", "total_pct"), med("ffmpeg", "three", "total_pct")
worst = lambda key, test="three": max(r.get(key, 0) for r in runs[("ours", test)])
own, shared = med("ours", "own", "total_pct"), med("ours", "defaults", "total_pct")
# The shared encoder's broadcast is named after its program.
encoder = next((k for k in runs[("ours", "defaults")][0] if k.startswith("dropped_") and "encoder" in k), None)
shared_lost = " / ".join(f"{worst(f'dropped_{h}', 'defaults'):.2f}" for h in ("record", "stream", "replay"))
shared_worst = max(worst(f"dropped_{h}", "defaults") for h in ("record", "stream", "replay"))
def codec_row(c):
    test = f"codec-{c}"
    keys = [k for k in runs[("ours", test)][0] if k.startswith("dropped_")]
    encoder_key = next((k for k in keys if "encoder" in k), None)
    encoder_lost = f"{worst(encoder_key, test):.2f} %" if encoder_key else "no encoder"
    goal = "met" if max(worst(k, test) for k in keys) <= 1 else "**missed**"
    return (f"| record alone, its defaults but `codec={c}` (encoded in broadcast-encoder, one run): CPU; video lost by "
            f"record; the encoder's frames dropped, of which the loop was late for | {med('ours', test, 'daemon_pct'):.1f} | "
            f"{med('ours', test, 'total_pct'):.1f}; {worst('dropped_record', test):.2f} %; {encoder_lost}, "
            f"{worst('late', test):.0f} late | | ≤ 1 %: {goal} |\n")
codec_rows = "".join(codec_row(c) for c in ("h264", "hevc", "av1") if ("ours", f"codec-{c}") in runs)
e = os.environ
section = f"""<!-- many:begin -->
## Several broadcasts on one capture

Generated by `bash bench/many.sh` on {e['BENCH_DATE']} (commit {e['BENCH_COMMIT']}), {e['BENCH_NPROC']} × {e['BENCH_CPU']};
{e['BENCH_FFMPEG']}. {e['BENCH_SECONDS']} s per run, {e['BENCH_REPEATS']} round(s), medians; measurements took {e['BENCH_ELAPSED']} s.

| 1080p30 from X11, PipeWire audio on | broadcastd | all our processes | ffmpeg (one process) | goal |
|---|---|---|---|---|
| record alone: CPU (% of one core) | {one:.1f} | {med('ours', 'one', 'total_pct'):.1f} | | |
| record + stream + inspect: CPU | **{three:.1f}** ({three / one:.3f}× alone) | **{ours_total:.1f}** | {ff:.1f} | broadcastd ≤ 1.2× alone: {'met' if three <= 1.2 * one else '**missed**'}; all ≤ 0.75× ffmpeg: {'met' if ours_total <= 0.75 * ff else '**missed**'} ({ours_total / ff:.2f}×) |
| record + stream + inspect: broadcastd's peak RSS (MB) | {worst('daemon_rss_mb'):.1f} | | {med('ffmpeg', 'three', 'rss_mb'):.1f} | within the 50 MB budget: {'met' if worst('daemon_rss_mb') <= 50 else '**missed**'} |
| frames dropped per handler (record / stream / inspect, %), of which the loop was late for | {worst('dropped_record'):.2f} / {worst('dropped_stream'):.2f} / {worst('dropped_inspect'):.2f}, {worst('late'):.0f} late | | | |
| X server grabs for three broadcasts | {med('ours', 'three', 'grabbed'):.0f} (once per frame) | | | |
| record + stream + replay, each encoding (`encode=own`): CPU | {med('ours', 'own', 'daemon_pct'):.1f} | {own:.1f} ({own / ff:.2f}× ffmpeg) | {ff:.1f} | |
| record + stream + replay with their defaults, one shared encode: CPU | {med('ours', 'defaults', 'daemon_pct'):.1f} | **{shared:.1f}** ({shared / ff:.2f}× ffmpeg, {shared / own:.2f}× each encoding) | {ff:.1f} | all ≤ 0.55× ffmpeg: {'met' if shared <= 0.55 * ff else '**missed**'} |
| the defaults: video lost per handler (record / stream / replay, %); the encoder's frames dropped | {shared_lost}; {worst(encoder, 'defaults') if encoder else float('nan'):.2f} | | | ≤ 1 %: {'met' if shared_worst <= 1 else '**missed**'} |
| the defaults: broadcastd's peak RSS (MB) | {worst('daemon_rss_mb', 'defaults'):.1f} | | | within the 50 MB budget: {'met' if worst('daemon_rss_mb', 'defaults') <= 50 else '**missed**'} |
{codec_rows}
**Reading.** Capture is paid once: three broadcasts cost broadcastd {three - one:.1f} points of a core more than one
(delivering each frame and audio chunk to three handlers instead of one), not three grabs and conversions. The rest
of our CPU is the handlers': record's and stream's x264 encodes of the same 1080p frames, three Opus encodes, and
inspect, which checksums every frame it gets. ffmpeg's figure is its x11grab capture and swscale conversion of
every frame plus its two x264 encodes; ours is {ours_total / ff:.2f}× it, with the audio it does not do.

**One encode for three handlers, by default.** With no setup fields, record, stream and replay take the packets of
one x264 encode (constant quality under 6000 kbit/s) and of one Opus encode per audio stream in `broadcast-encoder`,
a child of broadcastd, instead of encoding three times; the stream decodes the two audio tracks and mixes them into
its one Opus track. All our processes took {shared:.1f} % of a core against {own:.1f} % with each encoding by itself
(`encode=own`, {shared / own:.2f}×) and ffmpeg's {ff:.1f} % for two encodes ({shared / ff:.2f}×).

**How they were taken.** A release build linked with `--static-swift-stdlib` (as `make` builds it), `broadcastd
--source x11 --fps 30` with its default options and a private PipeWire stack playing tones into the default sink
and source (both captured), on a private 1920x1080 Xvfb whose content moves every frame (bench/record_tools.py
animate). The broadcasts are started together with `broadcastctl start --duration T --wait`. In the first rows
(`one`, `three`) and `own` each handler encodes by itself (`encode=own`, a departure from the defaults, so that
broadcastd delivers frames to every handler, which is what capture paid once measures): `record` (libx264
veryfast, zerolatency, crf 23 under 6000 kbit/s, keyframe every 2 s, two Opus tracks, fragmented MP4), `stream`
(libx264 veryfast, zerolatency, 4500 kbit/s, one Opus track of app and mic mixed, MPEG-TS over SRT to a local
srt-live-transmit that discards it), `replay` (as record, in memory) and `inspect`. The defaults row passes no
setup fields at all. CPU is utime + stime over the wall time: the daemon's own, and its children's (the
handlers) once reaped. ffmpeg: `ffmpeg -f x11grab -framerate 30 -video_size 1920x1080 -i :N -t T` with two
outputs, `-c:v libx264 -preset veryfast -tune zerolatency -crf 23 -maxrate 6000k -bufsize 6000k -g 60` into an MP4 and `-c:v libx264 -preset
veryfast -tune zerolatency -b:v 4500k -g 60 -f mpegts srt://…` to the same listener, under `/usr/bin/time -v`;
it captures no audio, so its figure leaves out the Opus encodes ours do. The benches run as root: the processes that
encode (`broadcast-encoder`, the handlers) refuse real-time scheduling before they start, as they do for every user;
until they did (before commit b7f577d), SVT-AV1 put each of its threads at SCHED_FIFO 99 as root, and broadcastd's
capture loop, kept off the cores, missed 2.7 % of the frames in the `codec=av1` row.
<!-- many:end -->
"""
from docsection import write_section
write_section(doc, "<!-- many:begin -->", "<!-- many:end -->", section)
PY
log "wrote the several-broadcasts section of $DOC (measurements took ${ELAPSED} s)"
cat "$RESULTS" >&2
