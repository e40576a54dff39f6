#!/usr/bin/env bash
# The hardening soak (not a CI test): one long 1080p30 broadcast from the synthetic source to a slow
# handler (Tests/fixtures/handlers/slow.py sleeping 0.2 s in every video callback), sampling every 10 s
# broadcastd's RSS and open descriptors and the frames delivered and dropped. Writes the soak section of
# docs/benchmarks.md and its plot, docs/soak.svg (gnuplot).
# One command: bash bench/soak.sh   Knobs (environment): BENCH_SOAK_SECONDS (3600), BENCH_SOAK_SLEEP (0.2).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T="${BENCH_SOAK_SECONDS:-3600}"
SLEEP="${BENCH_SOAK_SLEEP:-0.2}"
log() { printf '[bench soak] %s\n' "$*" >&2; }
ensure_bench_tools
ensure_packages gnuplot-nox
build_release

bench_work soak
sock="$WORK/bd.sock"
spawn "$BIN/broadcastd" --config /dev/null --source synthetic --size 1920x1080 --fps 30 --socket "$sock" \
    --handlers-dir "$ROOT/Tests/fixtures/handlers" --log-level warning 2>"$WORK/broadcastd.log"
bd=$LAST
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
[[ -S $sock ]] || { log "broadcastd did not start"; cat "$WORK/broadcastd.log" >&2; exit 1; }
spawn "$BIN/broadcastctl" start --socket "$sock" --handler slow --url "file://$WORK/summary.json" --set "sleep=$SLEEP" \
    --duration "$T" --wait >"$WORK/ctl.out" 2>&1
ctl=$LAST
samples="$WORK/samples.tsv"
echo -e "seconds\trss_mb\tfds\tdelivered\tdropped" >"$samples"
start=$(date +%s)
log "soaking for $T s; a sample every 10 s"
while kill -0 "$ctl" 2>/dev/null; do
    now=$(( $(date +%s) - start ))
    rss=$(awk '$1=="VmRSS:" {printf "%.1f", $2/1024}' "/proc/$bd/status")
    fds=$(ls "/proc/$bd/fd" | wc -l)
    counts=$("$BIN/broadcastctl" status --socket "$sock" --json 2>/dev/null | python3 -c \
        'import json,sys; s=json.load(sys.stdin).get("streams",{}).get("video",{}); print(s.get("delivered",0), s.get("dropped",0))' || echo "0 0")
    echo -e "$now\t$rss\t$fds\t${counts// /\\t}" >>"$samples"
    sleep 10
done
reap "$ctl" || { log "the broadcast failed:"; cat "$WORK/ctl.out" >&2; exit 1; }
final=$("$BIN/broadcastctl" status --socket "$sock" --json)
kill -TERM "$bd"; reap "$bd" || true

gnuplot <<GP
set terminal svg size 900,420 font "sans,12"
set output "$ROOT/docs/soak.svg"
set title "broadcastd during a $((T / 60))-minute 1080p30 broadcast to a slow handler"
set xlabel "minutes"
set ylabel "RSS (MB)"
set y2label "open descriptors"
set ytics nomirror
set y2tics
set yrange [0:60]
set y2range [0:*]
set key bottom right
set datafile separator "\t"
plot "$samples" using (\$1/60):2 skip 1 with lines lw 2 title "broadcastd RSS", \
     "$samples" using (\$1/60):3 skip 1 axes x1y2 with lines lw 2 dt 2 title "open descriptors", \
     50 with lines lc rgb "gray" dt 3 title "50 MB budget"
GP

python3 - "$samples" "$final" "$T" "$SLEEP" "$DOC" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, os.path.join(os.path.dirname(sys.argv[5]), "..", "bench"))
from docsection import write_section
path, final, seconds, sleep, doc = sys.argv[1:]
rows = [line.rstrip("\n").split("\t") for line in open(path)][1:]
rss = [float(r[1]) for r in rows if r[1]]
fds = [int(r[2]) for r in rows if r[2]]
warm = rss[len(rss) // 10:] or rss   # after the first tenth
video = json.loads(final).get("streams", {}).get("video", {})
delivered, dropped, late = video.get("delivered", 0), video.get("dropped", 0), video.get("late", 0)
section = f"""<!-- soak-begin -->
## Soak: {int(seconds) // 60} minutes at 1080p30 with a slow handler

Taken with `bash bench/soak.sh` (BENCH_SOAK_SECONDS={seconds}): broadcastd's synthetic source at 1920x1080,
30 fps, NV12, broadcasting to `Tests/fixtures/handlers/slow.py` (Python) sleeping {sleep} s in every
video callback, so it keeps up with at most 5 frames a second and broadcastd drops the rest. broadcastd
was sampled every 10 s ({len(rows)} samples).

| | |
|---|---|
| broadcastd RSS | first sample {rss[0]:.1f} MB, median {statistics.median(rss):.1f} MB, maximum {max(rss):.1f} MB; after the first tenth: {min(warm):.1f}–{max(warm):.1f} MB |
| open descriptors | {min(fds)}–{max(fds)} (first {fds[0]}, last {fds[-1]}) |
| video frames | {delivered} delivered, {dropped} dropped ({100 * dropped / max(1, delivered + dropped):.1f} %); of those dropped, {late} because broadcastd's loop was late for their capture deadline, the rest because the handler had no free slot |

![broadcastd's RSS and open descriptors over the soak](soak.svg)
<!-- soak-end -->
"""
write_section(doc, "<!-- soak-begin -->", "<!-- soak-end -->", section)
print(section)
PY
