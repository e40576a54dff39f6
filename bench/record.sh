#!/usr/bin/env bash
# Benchmarks the `record` handler (H.264 with libx264 and Opus, through libavcodec, into fragmented MP4):
#
#   x11     1080p30 X11 capture + encode, side by side with ffmpeg (x11grab → libx264, same x264 settings),
#           on the same private Xvfb with the same moving content; and ffmpeg with two Opus tracks as well,
#           and with -g 60 (the record handler's keyframe interval; ffmpeg's own default is 250 frames)
#   still   the same with a still screen (broadcastd does not encode repeated frames; ffmpeg encodes all)
#   sync    the synthetic source at 1080p30 with sync marks and an audio clock 300 ppm fast: the A/V offset
#           at the end of the recording, and the handler's CPU and memory with two Opus tracks
#           (and the same without audio, to show what the two Opus tracks cost)
#   4k      the synthetic source at 3840x2160, 30 fps: the handler's peak RSS with x264 threads 0 (automatic,
#           the default), 2 and 1
#   codecs  the moving 1080p30 X11 screen recorded by the handler with codec=h264, hevc and av1, each at its
#           defaults: the handler's CPU, the file's size, frames dropped; then quality: one more run keeps what
#           the handler received losslessly (codec=h264 crf=0: x264 is lossless at 8 bits), each codec's encoder
#           is run on those frames with the handler's own options (ffmpeg, the same libavcodec encoders), and
#           ffmpeg's psnr and ssim filters compare the decoded result with them. Not in the default set.
#
# Each run is one recording encoding by itself (encode=own): this measures the handler and the encoder it runs, as one
# process whose CPU, memory and drops are its own. By default record shares broadcastd's encoder (encode=shared): the
# same encoder (RecordingEncoder) in broadcast-encoder, and record muxing its packets; bench/many.sh measures that,
# alone and beside stream and replay.
#
# Writes the record section of docs/benchmarks.md from the figures of this run (and with `codecs`, the
# record-codecs section, bench/record_codecs_report.py).
# One command: bash bench/record.sh (bench/run.sh runs it too, unless BENCH_SKIP_RECORD=1).
#
# Knobs (environment): BENCH_RECORD_SECONDS (60), BENCH_RECORD_REPEATS (3), BENCH_RECORD_4K_SECONDS (20),
# BENCH_RECORD_4K_THREADS ("0 2 1"), BENCH_RECORD_TESTS ("x11 still sync 4k"; add codecs, or run it alone:
# BENCH_RECORD_TESTS=codecs BENCH_RECORD_REPEATS=1 bash bench/record.sh).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_RECORD_SECONDS:-60}"
REPEATS="${BENCH_RECORD_REPEATS:-3}"
T4K="${BENCH_RECORD_4K_SECONDS:-20}"
THREADS_4K="${BENCH_RECORD_4K_THREADS:-0 2 1}"
TESTS="${BENCH_RECORD_TESTS:-x11 still sync 4k}"
SIZE=1920x1080
X264=(preset=veryfast tune=zerolatency crf=23)   # the record handler's setup, as ffmpeg is given it
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3  # the system Python: python3-xlib is installed for it
TOOLS="$ROOT/bench/record_tools.py"

log() { printf '[bench record] %s\n' "$*" >&2; }
ensure_bench_tools
build_release
[ -x "$BIN/broadcast-handler-record" ] || { log "no $BIN/broadcast-handler-record after the build"; exit 1; }

WORK="$(mktemp -d /tmp/broadcastd-bench-record.XXXXXX)"
XVFB_PID=
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do   # children first (ffmpeg under /usr/bin/time, handlers under broadcastd)
        pkill -TERM -P "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "$XVFB_PID" ]; then kill "$XVFB_PID" 2>/dev/null || true; wait "$XVFB_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export XDG_RUNTIME_DIR="$WORK/xdg"; mkdir -m 700 -p "$XDG_RUNTIME_DIR"
RESULTS="$WORK/results.tsv"   # one line per run: tool test rep key=value...
: >"$RESULTS"
HZ=$(getconf CLK_TCK)

# probe_file FILE NAME: frames and duration of the video stream of FILE (decoded: -count_frames), its size in MiB, its audio tracks;
# NAME: where x264's settings string from the file goes ($WORK/x264-NAME.txt).
probe_file() {
    local frames duration
    IFS=, read -r frames duration < <(ffprobe -v error -select_streams v:0 -count_frames \
        -show_entries stream=nb_read_frames:format=duration -of csv=p=0:nk=1 "$1" | paste -sd, -)
    printf 'file_frames=%s file_s=%s out_mb=%s audio_tracks=%s' "${frames:-0}" "${duration:-0}" \
        "$(stat -c %s "$1" | awk '{printf "%.2f", $1 / 1048576}')" \
        "$(ffprobe -v error -select_streams a -show_entries stream=index -of csv=p=0 "$1" | wc -l)"
    # x264's own record of its settings (the SEI it writes in the stream), to compare the two encoders.
    grep -a -o -m 1 'x264 - core [[:print:]]*' "$1" | head -n 1 >"$WORK/x264-$2.txt" || true
}

# --- broadcastd + record handler ------------------------------------------------------------------
# run_ours TEST REP SECONDS "SETUP..." BROADCASTD-ARGS...: one fresh daemon, one broadcast of SECONDS to the
# record handler. CPU: the daemon's utime+stime across the broadcast, the handler's from the daemon's
# cutime+cstime once it has reaped it, broadcastctl's from /usr/bin/time; peak RSS: the daemon's VmHWM after the
# broadcast, the handler's last VmHWM before it exited (polled every 0.2 s by record_tools.py watch).
run_ours() {
    local test=$1 rep=$2 seconds=$3 setup=$4; shift 4
    local sock="$WORK/bd.sock" out="$WORK/ours-$test-$rep.${OUT_EXT:-mp4}" logf="$WORK/broadcastd-$test-$rep.log"
    local sets=(--set encode=own) kv; for kv in $setup; do sets+=(--set "$kv"); done
    rm -f "$sock" "$out"
    spawn "$BIN/broadcastd" --config /dev/null --socket "$sock" --handlers-dir "$ROOT/share/broadcastd/handlers" --log-level info "$@" 2>"$logf"
    local bd=$LAST
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    [[ -S $sock ]] || { log "broadcastd did not start"; cat "$logf" >&2; exit 1; }
    spawn "$PY" "$TOOLS" watch "$bd" "child:$bd" >"$WORK/watch.txt"
    local watcher=$LAST before children_before after children t0 t1
    read -r before children_before < <(cpu_ticks "$bd"); t0=$(date +%s.%N)
    spawn /usr/bin/time -v -o "$WORK/ctl.time" timeout $((seconds + 120)) "$BIN/broadcastctl" start --socket "$sock" \
        --handler record --url "file://$out" "${sets[@]}" --duration "$seconds" --wait >"$WORK/ctl.out" 2>>"$WORK/ctl.err"
    reap "$LAST" || { log "broadcastctl start failed:"; cat "$WORK/ctl.out" "$WORK/ctl.err" >&2; tail -n 20 "$logf" >&2; exit 1; }
    t1=$(date +%s.%N)
    for _ in $(seq 100); do [ -z "$(cat /proc/"$bd"/task/*/children 2>/dev/null)" ] && break; sleep 0.05; done
    sleep 0.3; kill -TERM "$watcher"; reap "$watcher" || true
    read -r after children < <(cpu_ticks "$bd")
    local hwm; hwm=$(status_kb "$bd" VmHWM)
    "$BIN/broadcastctl" status --socket "$sock" --json >"$WORK/status.json"
    kill -TERM "$bd"; reap "$bd" || true
    local extra; extra=$(probe_file "$out" "ours-$test")
    if [ "$test" = sync ]; then
        "$PY" "$TOOLS" avsync "$out" >"$WORK/avsync-$rep.json"
        extra+=" avsync=$WORK/avsync-$rep.json"
    fi
    "$PY" - "$WORK/status.json" "$WORK/watch.txt" "$WORK/ctl.time" "$logf" "$test" "$rep" "$HZ" \
        "$before" "$after" "$((children - children_before))" "$hwm" "$t0" "$t1" "$extra" <<'PY' >>"$RESULTS"
import json, re, sys
status, watch, ctl_time, logf, test, rep, hz, before, after, children, hwm, t0, t1, extra = sys.argv[1:]
s = json.load(open(status))
r = s.get("result", {})
watched = [dict(p.split("=", 1) for p in line.split()) for line in open(watch)]
d, w = watched   # the daemon, its child (the handler)
mb = lambda x: int(x) / 1024 if x not in ("NA", None) else float("nan")
t = open(ctl_time, errors="replace").read()
get = lambda k: float(re.search(re.escape(k) + r"[^:]*:\s*([\d.]+)", t).group(1))
hz = int(hz)
log = open(logf, errors="replace").read().splitlines()
tracks = r.get("audioTracks", [])
fields = dict(
    wall_s=float(t1) - float(t0),
    daemon_cpu_s=(int(after) - int(before)) / hz, handler_cpu_s=int(children) / hz,
    handler_cpu_polled_s=(int(w["ticks"]) / hz) if w.get("ticks", "NA") != "NA" else float("nan"),
    ctl_cpu_s=get("User time (seconds)") + get("System time (seconds)"),
    daemon_rss_mb=int(hwm) / 1024, daemon_anon_mb=mb(d["RssAnon"]), daemon_file_mb=mb(d["RssFile"]), daemon_shmem_mb=mb(d["RssShmem"]),
    handler_rss_mb=mb(w["VmHWM"]), handler_anon_mb=mb(w["RssAnon"]), handler_file_mb=mb(w["RssFile"]), handler_shmem_mb=mb(w["RssShmem"]),
    handler_name=w["name"],
    delivered=s["streams"]["video"]["delivered"], dropped=s["streams"]["video"]["dropped"],
    repeated=s["streams"]["video"]["repeated"],
    grabbed=s.get("capture", {}).get("framesGrabbed", float("nan")),
    encoded=r.get("encodedFrames", float("nan")), repeats_not_encoded=r.get("repeatedFramesNotEncoded", float("nan")),
    video_frames=r.get("videoFrames", float("nan")), duration_s=r.get("duration", float("nan")),
    tracks=len(tracks),
    audio_missing_ms=max((x.get("missingMs", 0) for x in tracks), default=0),
    audio_dropped_ms=max((x.get("droppedMs", 0) for x in tracks), default=0),
    audio_max_clock_offset_ms=max((x.get("maxClockOffsetMs", 0) for x in tracks), default=0),
    log_warnings=sum(1 for l in log if " warning " in l or " error " in l),
    error=r.get("error", "none").replace(" ", "_"),
)
fields["total_cpu_s"] = fields["daemon_cpu_s"] + fields["handler_cpu_s"] + fields["ctl_cpu_s"]
fields["total_cpu_pct"] = fields["total_cpu_s"] * 100 / fields["wall_s"]
print("ours", test, rep, " ".join(f"{k}={v}" for k, v in fields.items()), extra)
PY
    grep -E " (warning|error) " "$logf" | head -n 5 | sed "s/^/[bench record] $test $rep daemon log: /" >&2 || true
    if [ -n "${KEEP_OUT:-}" ]; then mv "$out" "$KEEP_OUT"; fi
    rm -f "$out"
}

# --- codecs: each encoder on what a handler received -------------------------------------------------
# The options VideoEncoderImplementation.options gives each encoder at the handler's defaults (H.264 veryfast, HEVC ultrafast, AV1 12,
# tune zerolatency, each codec's default crf, a keyframe every 2 s at 30 fps, no B-frames).
CODEC_FFMPEG_h264=(-c:v libx264 -preset veryfast -tune zerolatency -crf 23)
CODEC_FFMPEG_hevc=(-c:v libx265 -preset ultrafast -tune zerolatency -crf 28 -x265-params log-level=error)
CODEC_FFMPEG_av1=(-c:v libsvtav1 -preset 12 -crf 35 -svtav1-params pred-struct=1:tune=0)
# quality CODEC REFERENCE REP: encodes REFERENCE frame for frame as the handler would, then PSNR and SSIM (luma and
# all planes) of the decoded result against REFERENCE, and the encoder's CPU seconds, as a results line.
quality() {
    local codec=$1 ref=$2 rep=$3 enc="$WORK/quality-$1.mkv" args
    eval "args=(\"\${CODEC_FFMPEG_$codec[@]}\")"
    /usr/bin/time -f '%U %S' -o "$WORK/quality.time" ffmpeg -hide_banner -nostdin -loglevel error -y -i "$ref" -map 0:v \
        -fps_mode passthrough "${args[@]}" -g 60 -bf 0 -pix_fmt yuv420p "$enc" 2>"$WORK/svt.log"
    # Frame n against frame n (the encode keeps every frame, in order): timestamps could pair neighbours instead,
    # as the two files may start at slightly different times.
    ffmpeg -hide_banner -nostdin -i "$enc" -i "$ref" -filter_complex \
        "[0:v]setpts=N/30/TB,split[a][b];[1:v]setpts=N/30/TB,split[c][d];[a][c]psnr;[b][d]ssim" -f null - \
        2>"$WORK/quality.log" </dev/null
    local counts="" file
    for file in "$enc" "$ref"; do
        counts+=" $(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$file")"
    done
    "$PY" - "$WORK/quality.log" "$WORK/quality.time" "$codec" "$rep" "$(stat -c %s "$enc")" $counts <<'PY' >>"$RESULTS"
import re, sys
log, timing, codec, rep, size, frames_encoded, frames_reference = sys.argv[1:]
assert frames_encoded == frames_reference, f"{codec}: {frames_encoded} frames encoded of {frames_reference}"
text = open(log, errors="replace").read()
psnr = re.search(r"PSNR y:([\d.inf]+) u:[\d.inf]+ v:[\d.inf]+ average:([\d.inf]+)", text)
ssim = re.search(r"SSIM Y:([\d.]+) \([\d.inf]+\) U:[\d.]+ \([\d.inf]+\) V:[\d.]+ \([\d.inf]+\) All:([\d.]+)", text)
cpu = sum(float(x) for x in open(timing).read().split()[:2])
print("quality", "codec_" + codec, rep, f"psnr_y={psnr.group(1)} psnr_avg={psnr.group(2)} ssim_y={ssim.group(1)} "
      f"ssim_all={ssim.group(2)} encode_cpu_s={cpu} encoded_mb={int(size) / 1048576:.2f}")
PY
    rm -f "$enc"
}

# --- ffmpeg ----------------------------------------------------------------------------------------
# run_ffmpeg TOOL TEST REP: ffmpeg under /usr/bin/time -v, x11grab → libx264; TOOL ffmpeg_audio adds two
# Opus tracks, ffmpeg_g60 a keyframe every 60 frames (2 s, the record handler's default keyframeInterval).
run_ffmpeg() {
    local tool=$1 test=$2 rep=$3 out="$WORK/$1-$2-$3.mp4"
    local audio_in=() extra_out=()
    if [ "$tool" = ffmpeg_audio ]; then   # two tracks, as the record handler makes by default (app, mic)
        audio_in=(-f lavfi -i sine=frequency=440:sample_rate=48000 -f lavfi -i sine=frequency=880:sample_rate=48000)
        extra_out=(-map 0:v -map 1:a -map 2:a -c:a libopus -b:a 128k -ac 2)
    elif [ "$tool" = ffmpeg_g60 ]; then
        extra_out=(-g 60)
    fi
    spawn /usr/bin/time -v -o "$WORK/ffmpeg.time" ffmpeg -hide_banner -nostdin -y \
        -f x11grab -framerate 30 -video_size "$SIZE" -i "$DISPLAY" "${audio_in[@]}" -t "$T" \
        -c:v libx264 -preset veryfast -tune zerolatency -crf 23 -pix_fmt yuv420p "${extra_out[@]}" "$out" 2>"$WORK/ffmpeg.log"
    local ff=$LAST
    spawn "$PY" "$TOOLS" watch "child:$ff" >"$WORK/watch.txt"
    local watcher=$LAST
    reap "$ff" || { log "ffmpeg failed:"; tail -n 20 "$WORK/ffmpeg.log" >&2; exit 1; }
    reap "$watcher" || true
    local dup drop
    dup=$(tr '\r' '\n' <"$WORK/ffmpeg.log" | sed -n 's/.* dup=\([0-9]*\).*/\1/p' | tail -n 1)
    drop=$(tr '\r' '\n' <"$WORK/ffmpeg.log" | sed -n 's/.* drop=\([0-9]*\).*/\1/p' | tail -n 1)
    "$PY" - "$WORK/ffmpeg.time" "$WORK/watch.txt" "$tool" "$test" "$rep" "${dup:-0}" "${drop:-0}" "$(probe_file "$out" "$tool-$test")" <<'PY' >>"$RESULTS"
import re, sys
path, watch, tool, test, rep, dup, drop, extra = sys.argv[1:]
w = dict(p.split("=", 1) for p in open(watch).read().split())
mb = lambda x: int(x) / 1024 if x not in ("NA", None) else float("nan")
t = open(path, errors="replace").read()
get = lambda k: float(re.search(re.escape(k) + r"[^:]*:\s*([\d.]+)", t).group(1))
clock = next(l for l in t.splitlines() if "Elapsed (wall clock)" in l).rsplit(" ", 1)[1].split(":")
wall = sum(float(part) * 60 ** i for i, part in enumerate(reversed(clock)))
cpu = get("User time (seconds)") + get("System time (seconds)")
print(tool, test, rep, f"wall_s={wall} total_cpu_s={cpu} total_cpu_pct={cpu * 100 / wall} rss_mb={get('Maximum resident set size') / 1024} "
      f"anon_mb={mb(w['RssAnon'])} file_mb={mb(w['RssFile'])} shmem_mb={mb(w['RssShmem'])} polled_hwm_mb={mb(w['VmHWM'])} name={w['name']} dup={dup} drop={drop}", extra)
PY
    rm -f "$out"
}

# --- the screen --------------------------------------------------------------------------------------
# As bench/x11.sh: a solid background and xclock; plus record_tools.py animate (a scrolling document, a
# bouncing box, the pointer: every frame changes), which bench/x11.sh does not need.
ANIM_PID= CLOCK_PID=
start_content() {
    spawn xclock -update 1 -geometry 300x300+100+100 2>/dev/null; CLOCK_PID=$LAST
    spawn "$PY" "$TOOLS" animate; ANIM_PID=$LAST
    sleep 2   # the animation running, xclock drawn
}
stop_content() {
    local pid
    for pid in $ANIM_PID $CLOCK_PID; do kill -TERM "$pid" 2>/dev/null || true; reap "$pid" 2>/dev/null || true; done
    ANIM_PID= CLOCK_PID=
    xsetroot -solid '#30506e'   # clear what the animation drew: a still screen is background and nothing else
    sleep 1
}

has_test() { [[ " $TESTS " == *" $1 "* ]]; }
START=$(date +%s) LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if has_test x11 || has_test still; then
    n=$(free_display); start_xvfb "$n" "$SIZE"; export DISPLAY=:$n
    xsetroot -solid '#30506e'
    for rep in $(seq "$REPEATS"); do
        if has_test x11; then
            start_content
            log "round $rep/$REPEATS, moving screen: broadcastd + record (${T} s)"
            run_ours x11 "$rep" "$T" "${X264[*]}" --source x11 --display "$DISPLAY" --fps 30
            log "round $rep/$REPEATS, moving screen: ffmpeg x11grab → libx264 (${T} s)"
            run_ffmpeg ffmpeg x11 "$rep"
            log "round $rep/$REPEATS, moving screen: ffmpeg x11grab → libx264 + 2 × Opus (${T} s)"
            run_ffmpeg ffmpeg_audio x11 "$rep"
            log "round $rep/$REPEATS, moving screen: ffmpeg x11grab → libx264 -g 60 (${T} s)"
            run_ffmpeg ffmpeg_g60 x11 "$rep"
            stop_content
        fi
        if has_test still; then
            log "round $rep/$REPEATS, still screen: broadcastd + record, ffmpeg (${T} s each)"
            run_ours still "$rep" "$T" "${X264[*]}" --source x11 --display "$DISPLAY" --fps 30
            run_ffmpeg ffmpeg still "$rep"
        fi
    done
    kill "$XVFB_PID"; wait "$XVFB_PID" 2>/dev/null || true; XVFB_PID=
fi
if has_test codecs; then
    n=$(free_display); start_xvfb "$n" "$SIZE"; export DISPLAY=:$n
    xsetroot -solid '#30506e'
    for rep in $(seq "$REPEATS"); do
        start_content
        for codec in h264 hevc av1; do
            log "round $rep/$REPEATS, moving screen: broadcastd + record, codec=$codec at its defaults (${T} s)"
            run_ours "codec_$codec" "$rep" "$T" "codec=$codec" --source x11 --display "$DISPLAY" --fps 30
        done
        log "round $rep/$REPEATS, moving screen: what the handler receives, kept losslessly (${T} s)"
        OUT_EXT=mkv KEEP_OUT="$WORK/reference.mkv" run_ours codec_reference "$rep" "$T" "codec=h264 crf=0 preset=ultrafast" \
            --source x11 --display "$DISPLAY" --fps 30
        stop_content
        for codec in h264 hevc av1; do
            log "round $rep/$REPEATS: $codec on the lossless frames, PSNR and SSIM"
            quality "$codec" "$WORK/reference.mkv" "$rep"
        done
        rm -f "$WORK/reference.mkv"
    done
    kill "$XVFB_PID"; wait "$XVFB_PID" 2>/dev/null || true; XVFB_PID=
fi
if has_test sync; then
    for rep in $(seq "$REPEATS"); do
        log "round $rep/$REPEATS, synthetic 1080p30 with sync marks, audio clock +300 ppm: two Opus tracks, then none (${T} s each)"
        run_ours sync "$rep" "$T" "${X264[*]}" --source synthetic --size "$SIZE" --fps 30 --sync-marks --audio-clock-ppm 300
        run_ours sync_noaudio "$rep" "$T" "${X264[*]} audio=none" --source synthetic --size "$SIZE" --fps 30 --sync-marks --audio-clock-ppm 300
    done
fi
if has_test 4k; then
    for rep in $(seq "$REPEATS"); do
        for threads in $THREADS_4K; do
            log "round $rep/$REPEATS, synthetic 3840x2160 at 30 fps, x264 threads=$threads (${T4K} s)"
            run_ours "4k_threads$threads" "$rep" "$T4K" "${X264[*]} threads=$threads" --source synthetic --size 3840x2160 --fps 30
        done
    done
fi
ELAPSED=$(($(date +%s) - START))

export BENCH_CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" BENCH_NPROC="$(nproc)"
export BENCH_KERNEL="$(uname -srm)"
export BENCH_FFMPEG="$(ffmpeg -version | head -n 1 | cut -d' ' -f1-3)"
export BENCH_X264="libx264 $(dpkg-query -W -f='${Version}' 'libx264-[0-9]*' 2>/dev/null | head -n 1)"
export BENCH_OPUS="libopus $(dpkg-query -W -f='${Version}' libopus0 2>/dev/null)"
export BENCH_LIBAV="libavcodec $(dpkg-query -W -f='${Version}' 'libavcodec[0-9]*' 2>/dev/null | head -n 1)"
export BENCH_XVFB="$(dpkg-query -W -f='${Version}' xvfb)" BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export BENCH_LOAD="$LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after"
export BENCH_ELAPSED="$ELAPSED" BENCH_SECONDS="$T" BENCH_REPEATS="$REPEATS" BENCH_4K_SECONDS="$T4K"
export BENCH_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- Sources 2>/dev/null || echo ' (+ uncommitted changes in Sources/)')"
# The raw figures stay in the bench scratch directory (ignored by git) for a look after the run.
KEEP="$SCRATCH/record-last"; rm -rf "$KEEP"; mkdir -p "$KEEP"
cp "$RESULTS" "$WORK"/avsync-*.json "$WORK"/x264-*.txt "$WORK"/*.log "$KEEP"/ 2>/dev/null || true
export BENCH_X264_OPTIONS="$KEEP"
export -p | grep ' BENCH_' >"$KEEP/env.sh"   # to rewrite the section from these figures: . "$KEEP/env.sh"; python3 bench/record_report.py "$KEEP/results.tsv" docs/benchmarks.md
export BENCH_X265="libx265 $(dpkg-query -W -f='${Version}' 'libx265-[0-9]*' 2>/dev/null | head -n 1)"
export BENCH_SVTAV1="libsvtav1enc $(dpkg-query -W -f='${Version}' 'libsvtav1enc[0-9]*' 2>/dev/null | head -n 1)"
if grep -qv '^[a-z_]* codec_' "$RESULTS"; then "$PY" "$ROOT/bench/record_report.py" <(grep -v '^[a-z_]* codec_' "$RESULTS") "$DOC"; fi
if has_test codecs; then "$PY" "$ROOT/bench/record_codecs_report.py" "$RESULTS" "$DOC"; fi
log "wrote the record section of $DOC (measurements took ${ELAPSED} s; raw figures in $KEEP)"
cat "$RESULTS" >&2
