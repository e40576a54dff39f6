# Sourced by bench/stream.sh: glass-to-glass latency and simulcast CPU on a private Xvfb, against ffmpeg.
# shellcheck shell=bash
G2G_T="${BENCH_G2G_SECONDS:-20}"
SIM_T="${BENCH_SIMULCAST_SECONDS:-15}"
G2G_REPEATS="${BENCH_G2G_REPEATS:-2}"
SETTLE="${BENCH_WHIP_SETTLE:-4}"   # s from the handler's start: its CPU after this is the connected (live) part
SIZE="${BENCH_G2G_SIZE:-1280x720}"
LAT="${BENCH_SRT_LATENCY_US:-120000}"
RESULTS_X="$WORK/results-x11.tsv"; : >"$RESULTS_X"
FLASHER="$ROOT/bench/flasher.py"

DISP=$(free_display)
start_xvfb "$DISP" "$SIZE"; PIDS+=("$XVFB_PID")
PIPEWIRE_PIDS=()
start_pipewire "$WORK/pipewire"; PIDS+=("${PIPEWIRE_PIDS[@]}")
export PIPEWIRE_REMOTE="$WORK/pipewire/pipewire-0"
FFMPEG_X264=(-c:v libx264 -preset veryfast -tune zerolatency -b:v 4500k -maxrate 4500k -bufsize 4500k -g 60 -bf 0 -pix_fmt yuv420p)

# start_broadcastd NAME: broadcastd capturing the Xvfb (audio from the private PipeWire), its PID in $BD.
start_broadcastd() {
    SOCK="$WORK/$1.sock"; rm -f "$SOCK"
    spawn env DISPLAY=":$DISP" "$BIN/broadcastd" --config /dev/null --source x11 --fps 30 --socket "$SOCK" \
        --handlers-dir "$ROOT/share/broadcastd/handlers" --log-level warning 2>"$WORK/$1.log"
    BD=$LAST
    for _ in $(seq 200); do [[ -S $SOCK ]] && break; sleep 0.05; done
    [[ -S $SOCK ]] || { log "broadcastd did not start"; cat "$WORK/$1.log" >&2; exit 1; }
}
stop_broadcastd() { kill -TERM "$BD"; reap "$BD" || true; }
all_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12+$13+$14+$15}'; }
seconds_of() { awk -v t="$1" -v hz="$HZ" 'BEGIN{print t/hz}'; }

# g2g TOOL REP [PART]: one glass-to-glass run. TOOL: ours (the defaults: the packets of the encoder broadcastd
# shares), ours-noaudio, ours-own (encode=own: the handler encodes by itself), ffmpeg (all SRT), or whip (ours to the
# tests' WHIP endpoint, Tests/fixtures/whip_endpoint.py, which decodes with openh264dec to the same 64x36 gray frames
# and stamps them on arrival; no jitter buffer). PART labels the result row (g2g; whip for the WHIP comparison, which
# also takes the handler's CPU).
g2g() {
    local tool=$1 rep=$2 part=${3:-g2g} port frames="$WORK/g2g-$1-$2.json" flashes="$WORK/flashes-$1-$2.json" sender
    if [[ $tool == whip ]]; then
        port=$(free_tcp_port)
        spawn "$PY" "$ROOT/Tests/fixtures/whip_endpoint.py" --port "$port" --out "$WORK" --gray 64x36 \
            >"$WORK/whip-events-$rep.jsonl" 2>"$WORK/whip-endpoint-$rep.log"
    else
        port=$(free_udp_port)
        spawn "$PY" "$TOOLS" receive "$port" "$frames" "$LAT"
    fi
    local receiver=$LAST
    sleep 0.5
    local watcher=
    if [[ $tool == ours* || $tool == whip ]]; then
        start_broadcastd "g2g-$rep"
        # The handler's CPU, for the WHIP comparison (the SRT one against ffmpeg runs without a watcher).
        if [[ $part == whip ]]; then
            spawn "$PY" "$TOOLS" watch "$BD" "$WORK/g2g-watch-$tool-$rep.json" "$SETTLE"; watcher=$LAST
        fi
        local audio=() url="srt://127.0.0.1:$port?latency=$LAT"
        # Video only, every frame sent, as ffmpeg here: encoding by itself (a shared encoder sends only the frames
        # that change, and this screen is black between flashes: too little for the receiver's 32 KiB probe).
        [[ $tool == ours-noaudio ]] && audio=(--set audio=none --set encode=own)
        [[ $tool == ours-own ]] && audio=(--set encode=own)
        [[ $tool == whip ]] && url="whip://127.0.0.1:$port/whip"
        spawn "$BIN/broadcastctl" start --socket "$SOCK" --handler stream --url "$url" "${audio[@]}" \
            --duration "$G2G_T" --wait --json >"$WORK/g2g-ctl-$rep.out"
    else
        spawn ffmpeg -v error -nostdin -f x11grab -framerate 30 -video_size "$SIZE" -i ":$DISP" -t "$G2G_T" "${FFMPEG_X264[@]}" \
            -f mpegts "srt://127.0.0.1:$port?latency=$LAT"
    fi
    sender=$LAST
    sleep 1.5   # connected, past the first keyframe
    DISPLAY=":$DISP" "$PY" "$FLASHER" flash "$((G2G_T - 3))" "$flashes"
    reap "$sender" || { log "$tool failed"; [[ $tool != ffmpeg ]] && cat "$WORK/g2g-ctl-$rep.out" >&2; exit 1; }
    if [[ $tool == whip ]]; then
        kill -TERM "$receiver" 2>/dev/null || true   # SIGINT: ignored by a background job of a script
        reap "$receiver" || true
        "$PY" "$TOOLS" whip-frames "$WORK/whip-events-$rep.jsonl" "$frames"
    else
        reap "$receiver" || true
    fi
    local handler= settled=- live=-
    if [[ $tool != ffmpeg ]]; then stop_broadcastd; fi
    if [[ -n $watcher ]]; then
        kill -TERM "$watcher" 2>/dev/null || true; reap "$watcher" || true
        # The whole broadcast's CPU; that of its first $SETTLE s; and after them, as a share of one core.
        read -r handler settled live < <("$PY" -c 'import json, sys
w, hz = json.load(open(sys.argv[1])), float(sys.argv[2])
t, s = w.get("ticks", 0), w.get("settled_ticks")
print(t / hz, "-" if s is None else s / hz, "-" if s is None else 100 * (t - s) / hz / (w["at"] - w["settled_at"]))' \
            "$WORK/g2g-watch-$tool-$rep.json" "$HZ")
    fi
    local lat missed decoded
    [[ -n ${BENCH_DEBUG_DIR:-} ]] && cp "$frames" "$flashes" "$BENCH_DEBUG_DIR/"
    read -r lat missed decoded < <("$PY" "$TOOLS" g2g "$frames" "$flashes")
    echo "part=$part tool=$tool rep=$rep seconds=$G2G_T sim_seconds=$SIM_T size=$SIZE latency_us=$LAT" \
        "latencies=$lat missed=$missed frames=$decoded handler_cpu_s=${handler:--} settle_s=$SETTLE" \
        "handler_settle_cpu_s=$settled handler_live_cpu_pct=$live" >>"$RESULTS_X"
    log "g2g $tool $rep: $lat ms ($missed missed; $decoded frames decoded; handler ${handler:--} s CPU)"
}

simulcast() {
    local tool=$1 n=$2 rep=$3 ports=() listeners=() i port
    for i in $(seq "$n"); do
        port=$(free_udp_port); ports+=("$port")
        spawn srt-live-transmit -q "srt://:$port?mode=listener" file://con >/dev/null 2>&1; listeners+=("$LAST")
    done
    sleep 0.5
    DISPLAY=":$DISP" "$PY" "$FLASHER" motion "$((SIM_T + 8))" & local motion=$!; PIDS+=("$motion")
    local cpu handler=0
    if [[ $tool == ours ]]; then
        start_broadcastd "sim-$n-$rep"
        spawn "$PY" "$TOOLS" watch "$BD" "$WORK/sim-watch-$n-$rep.json"; local watcher=$LAST
        local also="" before after
        for port in "${ports[@]:1}"; do also+="${also:+,}srt://127.0.0.1:$port"; done
        before=$(all_ticks "$BD")
        "$BIN/broadcastctl" start --socket "$SOCK" --handler stream --url "srt://127.0.0.1:${ports[0]}" ${also:+--set "also=$also"} \
            --set encode=own --duration "$SIM_T" --wait --json >"$WORK/sim-ctl-$n-$rep.out" || { log "ours failed"; cat "$WORK/sim-ctl-$n-$rep.out" >&2; exit 1; }
        sleep 1   # the handler has ended and been reaped: its time is in the daemon's children's
        after=$(all_ticks "$BD")
        cpu=$(seconds_of "$((after - before))")
        kill -TERM "$watcher" 2>/dev/null || true; reap "$watcher" || true
        handler=$(seconds_of "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("ticks", 0))' "$WORK/sim-watch-$n-$rep.json")")
        stop_broadcastd
    else
        local senders=()
        for i in $(seq "$n"); do
            spawn /usr/bin/time -v -o "$WORK/sim-ffmpeg-$n-$rep-$i.time" ffmpeg -v error -nostdin -f x11grab -framerate 30 \
                -video_size "$SIZE" -i ":$DISP" -t "$SIM_T" "${FFMPEG_X264[@]}" -f mpegts "srt://127.0.0.1:${ports[$((i - 1))]}"
            senders+=("$LAST")
        done
        for i in "${senders[@]}"; do reap "$i" || { log "ffmpeg failed"; exit 1; }; done
        cpu=$(cat "$WORK"/sim-ffmpeg-"$n"-"$rep"-*.time | awk -F': ' '/User time/ {u+=$2} /System time/ {s+=$2} END {print u+s}')
    fi
    kill -TERM "$motion" 2>/dev/null || true; wait "$motion" 2>/dev/null || true; forget "$motion"
    for i in "${listeners[@]}"; do kill -INT "$i" 2>/dev/null || true; reap "$i" || true; done
    echo "part=simulcast tool=$tool destinations=$n rep=$rep seconds=$SIM_T size=$SIZE cpu_s=$cpu handler_cpu_s=$handler" >>"$RESULTS_X"
    log "simulcast $tool x$n $rep: $cpu s CPU (handler $handler s)"
}

for rep in $(seq "$G2G_REPEATS"); do
    if [[ " $PARTS " == *" g2g "* ]]; then
        for tool in ${BENCH_G2G_TOOLS:-ours ffmpeg ours-noaudio ours-own}; do g2g "$tool" "$rep"; done
    fi
    if [[ " $PARTS " == *" whip "* ]]; then g2g whip "$rep" whip; g2g ours-own "$rep" whip; fi
    if [[ " $PARTS " == *" simulcast "* ]]; then
        simulcast ours 1 "$rep"; simulcast ours 3 "$rep"; simulcast ffmpeg 1 "$rep"; simulcast ffmpeg 3 "$rep"
    fi
done
if [[ " $PARTS " == *" g2g "* || " $PARTS " == *" simulcast "* ]]; then
    "$PY" "$TOOLS" report-g2g "$RESULTS_X" "$DOC"
fi
if [[ " $PARTS " == *" whip "* ]]; then "$PY" "$TOOLS" report-whip "$RESULTS_X" "$DOC"; fi
