#!/usr/bin/env bash
# Runs every test: unit tests, then integration tests on real daemons, handlers and terminals, then
# 30 s each of fuzzing the message decoder and the JSON payload decoder.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_packages "${BROADCASTD_PACKAGES[@]}"
ensure_swift

echo "==> checking the format (.swift-format)" >&2
scripts/check-format.sh
echo "==> building" >&2
build_log=$(mktemp)
swift build --build-tests 2>&1 | tee "$build_log"
# No warnings in the project's own code (a clean clone compiles all of it; the dependencies' are theirs).
if grep -E "^$PWD/(Sources|Tests)/[^:]+:[0-9]+:[0-9]+: warning:" "$build_log" >&2; then
    echo "the build has warnings (above): fix them" >&2
    rm -f "$build_log"
    exit 1
fi
rm -f "$build_log"
# broadcastd as `make` builds it (release, the Swift libraries linked in): the memory tests measure what users run.
echo "==> building broadcastd as make does, for the memory tests" >&2
swift build -c release --static-swift-stdlib --product broadcastd
echo "==> testing" >&2
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
# The unit tests first, in parallel, then the integration suite by itself: it checks rates and timing, which the
# unit tests' busy threads beside it would disturb on two cores.
failed=0
for target in BroadcastUnitTests BroadcastIntegrationTests; do
    set +e
    swift test --skip-build --filter "^$target\\." --xunit-output "$results/$target.xml"
    status=$?
    set -e
    # The verdict comes from the results file Swift Testing writes itself (scripts/test_verdict.py says why).
    python3 scripts/test_verdict.py "$results/$target-swift-testing.xml" || failed=1
    [ "$status" -eq 0 ] || { echo "swift test ($target) exited with status $status" >&2; failed=1; }
done
[ "$failed" -eq 0 ] || exit 1
# The message and JSON decoders under libFuzzer, for a bounded time (scripts/fuzz.sh SECONDS runs them longer).
scripts/fuzz.sh "${BROADCASTD_FUZZ_SECONDS:-30}"
