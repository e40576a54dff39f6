#!/usr/bin/env bash
# Runs every test: unit tests, then integration tests on real daemons, handlers and terminals, then
# 30 s of fuzzing the message decoder.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_packages "${BROADCASTD_PACKAGES[@]}"
ensure_swift

echo "==> building" >&2
swift build --build-tests
echo "==> testing" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
swift test --skip-build 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One plain closing line for CI, from Swift Testing's own summary.
summary=$(grep -E "Test run with [0-9]+ tests? .* (passed|failed)" "$log" | tail -1 || true)
if [ -z "$summary" ]; then
    echo "swift test ended (exit status $status) without Swift Testing's summary: the test process crashed or was killed; its output above ends where it stopped" >&2
    exit 1
fi
total=$(sed -E 's/.*Test run with ([0-9]+) tests?.*/\1/' <<<"$summary")
failed=$(grep -E "^✘ Test .* failed after" "$log" | grep -vc "^✘ Test run" || true)
echo "$((total - failed)) passed, $failed failed"
if [ "$total" -eq 0 ]; then echo "no tests ran" >&2; exit 1; fi
[ "$status" -eq 0 ] || exit "$status"
# The message decoder under libFuzzer, for a bounded time (scripts/fuzz.sh SECONDS runs it longer).
scripts/fuzz.sh "${BROADCASTD_FUZZ_SECONDS:-30}"
