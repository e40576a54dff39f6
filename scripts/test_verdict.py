#!/usr/bin/env python3
"""The verdict of a test run, from the xUnit file Swift Testing writes itself.

`swift test` forwards the test process's output in chunks and drops any chunk that is not whole
UTF-8 (a chunk that ends inside a character such as "✔"), so its console output can lose lines,
the closing summary among them. The xUnit file does not pass through it.

Prints "N passed, F failed" (and what is skipped), then each failure with its message; exits 0 only
when at least one test ran and none failed or was skipped.
"""
import sys
import xml.etree.ElementTree as ElementTree


def main(path: str) -> int:
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as error:
        print(f"no test results in {path} ({error}): the test process crashed or was killed before the run ended; "
              "its output above ends where it stopped", file=sys.stderr)
        return 1
    cases = root.findall(".//testcase")
    failed = [case for case in cases if case.find("failure") is not None]
    skipped = [case for case in cases if case.find("skipped") is not None]
    passed = len(cases) - len(failed) - len(skipped)
    print(f"{passed} passed, {len(failed)} failed" + (f", {len(skipped)} skipped" if skipped else ""))
    for case in failed:
        print(f"FAILED {case.get('classname')}.{case.get('name')}", file=sys.stderr)
        for issue in case.findall("failure"):
            print("    " + (issue.get("message") or "").replace("\n", "\n    "), file=sys.stderr)
    for case in skipped:
        reason = (case.find("skipped").text or "").strip()
        print(f"SKIPPED {case.get('classname')}.{case.get('name')}: {reason} (a skipped test is not a pass)", file=sys.stderr)
    if not cases:
        print("no tests ran", file=sys.stderr)
    return 0 if cases and not failed and not skipped else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
