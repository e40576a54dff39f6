#!/usr/bin/env bash
# Fuzzes the protocol's message decoder (Sources/BroadcastProtocolFuzzing) with libFuzzer, which comes
# with the Swift toolchain. scripts/test.sh runs it for 30 s; run it longer by hand:
#   scripts/fuzz.sh [SECONDS]     (default 600)
# Starts from Tests/fixtures/fuzz (the seeds and every input that once broke the decoder) plus what
# earlier runs found (.build-fuzz/corpus). An input that crashes is kept and named: copy it into
# Tests/fixtures/fuzz, where the unit tests replay it, and fix the decoder. (Swift's own backtracer is
# turned off so that libFuzzer's crash handler gets to write the input.)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
scratch="$PWD/.build-fuzz"
echo "==> building the fuzz target (libFuzzer)" >&2
swift build -c release --scratch-path "$scratch" --product broadcast-fuzz-protocol \
    --sanitize fuzzer -Xswiftc -DFUZZING -Xswiftc -parse-as-library >&2
mkdir -p "$scratch/corpus" "$scratch/crashes"
echo "==> fuzzing the message decoder for $seconds s" >&2
set +e
SWIFT_BACKTRACE=enable=no "$scratch/release/broadcast-fuzz-protocol" "$scratch/corpus" Tests/fixtures/fuzz \
    -max_total_time="$seconds" -max_len=4096 -timeout=5 -rss_limit_mb=2048 \
    -artifact_prefix="$scratch/crashes/" -print_final_stats=1 2>"$scratch/fuzz.log"
status=$?
set -e
grep -E "^(#[0-9]+\s+DONE|Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb)" "$scratch/fuzz.log" >&2 || true
if [ "$status" -ne 0 ]; then
    tail -40 "$scratch/fuzz.log" >&2
    echo "fuzzing found an input that breaks the decoder (kept in $scratch/crashes/):" >&2
    ls -t "$scratch/crashes/" | head -3 | sed "s|^|  $scratch/crashes/|" >&2
    echo "copy it into Tests/fixtures/fuzz/ (the unit tests replay it) and fix the decoder" >&2
    exit 1
fi
