#!/usr/bin/env bash
# Fuzzes the protocol's message decoder and its JSON payload decoder (Sources/BroadcastProtocolFuzzing)
# with libFuzzer, which comes with the Swift toolchain. scripts/test.sh runs each for 30 s; longer by hand:
#   scripts/fuzz.sh [SECONDS]     (default 600 each)
# Starts from Tests/fixtures/fuzz and fuzz-json (the seeds and every input that once broke a decoder)
# plus what earlier runs found (.build-fuzz/corpus, corpus-json). An input that crashes is kept and named: copy it into
# Tests/fixtures/fuzz, where the unit tests replay it, and fix the decoder. (Swift's own backtracer is
# turned off so that libFuzzer's crash handler gets to write the input.)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
scratch="$PWD/.build-fuzz"
echo "==> building the fuzz target (libFuzzer)" >&2
swift build -c release --scratch-path "$scratch" --product broadcast-fuzz-protocol \
    --sanitize fuzzer -Xswiftc -DFUZZING -Xswiftc -parse-as-library >&2
# Two targets, each for SECONDS: the message stream (Tests/fixtures/fuzz) and the JSON payloads
# (BROADCASTD_FUZZ_TARGET=json, Tests/fixtures/fuzz-json).
failed=0
for target in messages json; do
    suffix=$([ "$target" = json ] && echo "-json" || true)
    corpus="$scratch/corpus$suffix"
    mkdir -p "$corpus" "$scratch/crashes$suffix"
    echo "==> fuzzing the $target decoder for $seconds s" >&2
    set +e
    BROADCASTD_FUZZ_TARGET=$target SWIFT_BACKTRACE=enable=no "$scratch/release/broadcast-fuzz-protocol" \
        "$corpus" "Tests/fixtures/fuzz$suffix" \
        -max_total_time="$seconds" -max_len=4096 -timeout=5 -rss_limit_mb=2048 \
        -artifact_prefix="$scratch/crashes$suffix/" -print_final_stats=1 2>"$scratch/fuzz$suffix.log"
    status=$?
    set -e
    grep -E "^(#[0-9]+\s+DONE|Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb)" "$scratch/fuzz$suffix.log" >&2 || true
    if [ "$status" -ne 0 ]; then
        tail -40 "$scratch/fuzz$suffix.log" >&2
        echo "fuzzing found an input that breaks the $target decoder (kept in $scratch/crashes$suffix/):" >&2
        ls -t "$scratch/crashes$suffix/" | head -3 | sed "s|^|  $scratch/crashes$suffix/|" >&2
        echo "copy it into Tests/fixtures/fuzz$suffix/ (the unit tests replay it) and fix the decoder" >&2
        failed=1
    fi
done
exit "$failed"
