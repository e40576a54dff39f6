"""broadcastd-check-handler NAME: runs a handler the way broadcastd does and reports, in docs/protocol.md's words,
what it
did wrong (docs/protocol.md section 19).

A private broadcastd on the synthetic source runs one broadcast of the handler: setup, live, a pause and a resume, its
manifest's commands, FINISH. Between broadcastd and the handler a relay (broadcastd.relay) reads every message both
ways and checks the handler's: HELLO, READY once and in time, every VIDEO_SAMPLE released exactly once, commands
answered once and in time, payloads as protocol.json declares them, exit with status 0 within 5 s of
BROADCAST_FINISHED. Exit status: 0 nothing wrong, 1 something wrong, 2 the check could not run.
"""

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

from . import description as protocol_description
from .controller import Controller, Setup
from .wire import DaemonError

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CheckError(Exception):
    """The check could not run (no broadcastd, no manifest, the daemon did not start)."""


def manifest_directories(given: List[str], daemon: str) -> List[str]:
    """Where broadcastd looks for manifests (docs/protocol.md section 16), `given` first."""
    home = os.path.expanduser("~")
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    data_dirs = (os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(daemon)))
    return list(given) + [
        os.path.join(d, "broadcastd", "handlers") for d in [data_home] + data_dirs + [os.path.join(prefix, "share")]
    ]


def find_manifest(name: str, directories: List[str]) -> Tuple[str, Dict]:
    for directory in directories:
        try:
            files = sorted(f for f in os.listdir(directory) if f.endswith(".json"))
        except OSError:
            continue
        for file in files:
            path = os.path.join(directory, file)
            try:
                with open(path, encoding="utf-8") as f:
                    manifest = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(manifest, dict) and manifest.get("name") == name:
                return path, manifest
    raise CheckError(f"no manifest of a handler named {name!r} in {', '.join(directories)}")


def parse_command(text: str) -> Tuple[str, Dict[str, str]]:
    """'save last=30' -> ('save', {'last': '30'}): broadcastd converts text to the declared types."""
    words = shlex.split(text)
    if not words:
        raise CheckError("--command needs a command's name")
    arguments = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            raise CheckError(f"--command {text!r}: arguments are KEY=VALUE")
        arguments[key] = value
    return words[0], arguments


class Run:
    """One private broadcastd, its folder, and what was seen."""

    def __init__(self, args, daemon: str, manifest_path: str, manifest: Dict):
        self.args = args
        self.manifest = manifest
        self.folder = tempfile.mkdtemp(prefix="broadcastd-check-")
        os.chmod(self.folder, 0o700)
        self.socket = os.path.join(self.folder, "broadcastd.sock")
        self.daemon_log = os.path.join(self.folder, "broadcastd.log")
        self.handler_log = os.path.join(self.folder, "handler.log")
        self.relay_log = os.path.join(self.folder, "relay.log")
        self.finished: Optional[Dict] = None
        self.problems: List[str] = []
        self.notes: List[str] = []
        self.done: List[str] = []
        handlers = os.path.join(self.folder, "handlers")
        os.mkdir(handlers)
        wrapper = dict(
            manifest,
            exec=sys.executable,
            arguments=[
                "-c",
                "import sys; sys.path.insert(0, sys.argv[1]); import broadcastd.relay as r; "
                "sys.exit(r.relay_main(sys.argv[2:]))",
                PACKAGE_PARENT,
                "--relay",
                os.path.abspath(manifest_path),
                "--log",
                self.relay_log,
                "--daemon",
                daemon,
                "--handler-log",
                self.handler_log,
                "--description",
                self.description_path(),
            ],
        )
        with open(os.path.join(handlers, "handler.json"), "w", encoding="utf-8") as f:
            json.dump(wrapper, f)
        environment = dict(
            os.environ,
            XDG_RUNTIME_DIR=self.folder,
            XDG_DATA_HOME=os.path.join(self.folder, "data"),
            XDG_DATA_DIRS=os.path.join(self.folder, "none"),
            XDG_CONFIG_HOME=os.path.join(self.folder, "config"),
        )
        for variable in ("BROADCASTD_SOCKET", "PIPEWIRE_REMOTE", "PIPEWIRE_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"):
            environment.pop(variable, None)
        with open(self.daemon_log, "w") as log:
            self.process = subprocess.Popen(
                [
                    daemon,
                    "--source",
                    "synthetic",
                    "--size",
                    "640x360",
                    "--socket",
                    self.socket,
                    "--handlers-dir",
                    handlers,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=environment,
            )
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise CheckError(f"broadcastd did not start: {self.tail(self.daemon_log)}")
            time.sleep(0.02)

    def description_path(self) -> str:
        path = os.path.join(self.folder, "protocol.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(protocol_description(), f)
        return path

    @staticmethod
    def tail(path: str, lines: int = 12) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def wait_for(
        self, controller: Controller, broadcast: int, states: Tuple[str, ...], timeout: float
    ) -> Optional[Dict]:
        """The STATE_CHANGED of `broadcast` reaching one of `states`, or its FINISHED; None after `timeout` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            event = controller.next_event(max(0.01, deadline - time.monotonic()))
            if event is None:
                return None
            name, payload = event
            if payload.get("broadcast") != broadcast:
                continue
            if name == "finished":
                self.finished = payload
                return payload
            if name == "stateChanged" and payload.get("state") in states:
                return payload
        return None

    def broadcast(self) -> None:
        with Controller(self.socket, client="broadcastd-check-handler") as controller:
            if controller.revision is None:
                self.notes.append(f"{controller.welcome.get('server')} announces no revision: older than 2.6")
            controller.subscribe()
            broadcast, _ = controller.start(self.manifest["name"])
            url = self.args.url
            if url is None and (self.manifest.get("url") or {}).get("required"):
                url = os.path.join(self.folder, "output", "broadcast")
                os.makedirs(os.path.dirname(url))
            with Setup(self.socket, client="broadcastd-check-handler") as setup:
                setup.complete_setup(broadcast, url=url, setup_info=dict(kv.split("=", 1) for kv in self.args.set))
            try:
                self.exercise(controller, broadcast)
            except (
                DaemonError
            ) as e:  # the broadcast failed meanwhile (FINISHED says why), or broadcastd refused the check
                if self.finished is None:
                    self.wait_for(controller, broadcast, (), 12)
                (self.notes if self.finished else self.problems).append(
                    f"broadcastd refused a request of the check: {e.code}: {e.message}"
                )

    def exercise(self, controller: Controller, broadcast: int) -> None:
        """Live, a pause and a resume, the commands, FINISH: each step waited for."""
        if not self.live(controller, broadcast):
            return
        time.sleep(self.args.seconds)
        controller.pause(broadcast)
        if self.wait_for(controller, broadcast, ("paused",), 5) is None or self.finished:
            return self.failed_early("PAUSE")
        self.done.append("paused")
        time.sleep(0.5)
        controller.resume(broadcast)
        if self.wait_for(controller, broadcast, ("live",), 5) is None or self.finished:
            return self.failed_early("RESUME")
        self.done.append("resumed")
        time.sleep(1)
        self.commands(controller, broadcast)
        if self.finished:
            return self.failed_early("its commands")
        controller.finish(broadcast)
        if self.finished is None and self.wait_for(controller, broadcast, (), 5 + 2 + 2 + 3) is None:
            self.problems.append("broadcastd did not report the broadcast finished within 12 s of FINISH")

    def live(self, controller: Controller, broadcast: int) -> bool:
        status = self.wait_for(controller, broadcast, ("live",), 10 + 3)
        if status is None:
            self.problems.append("the broadcast did not go live within 13 s (section 6: READY within 10 s of launch)")
            return False
        if self.finished:
            self.failed_early("going live")
            return False
        self.done.append("live")
        return True

    def failed_early(self, during: str) -> None:
        if self.finished is None:
            self.problems.append(f"the broadcast did not answer {during} as section 14 says")

    def commands(self, controller: Controller, broadcast: int) -> None:
        declared = self.manifest.get("commands") or []
        if self.args.command:
            chosen = [parse_command(text) for text in self.args.command]
        else:
            chosen = [(c["name"], {}) for c in declared if not any(a.get("required") for a in c.get("arguments") or [])]
            skipped = [c["name"] for c in declared if c["name"] not in {name for name, _ in chosen}]
            if skipped:
                self.notes.append(f"not sent (they need arguments; give them with --command): {', '.join(skipped)}")
        for name, arguments in chosen:
            try:
                controller.send_command(name, arguments, broadcast=broadcast)
                self.done.append(f"command {name}")
            except DaemonError as e:
                if e.code == "command-failed":
                    self.done.append(f"command {name} (answered with an error)")
                elif e.code == "command-timeout":
                    self.problems.append(
                        f"it did not answer '{name}' within 10 s (section 8.6: it answers a COMMAND once; "
                        "section 6: within 10 s)"
                    )
                else:
                    self.problems.append(f"broadcastd refused '{name}': {e.code}: {e.message}")
            if self.finished:
                return

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def relay_findings(self) -> Dict:
        stats: Dict = {}
        try:
            with open(self.relay_log, encoding="utf-8") as f:
                for line in f:
                    entry = json.loads(line)
                    if "problem" in entry:
                        self.problems.append(entry["problem"])
                    elif "note" in entry:
                        self.notes.append(entry["note"])
                    elif "stats" in entry:
                        stats = entry["stats"]
        except OSError:
            self.problems.append("the handler was never launched (broadcastd did not start the relay)")
        except ValueError:
            self.problems.append("the relay's findings are unreadable")
        if not stats and os.path.exists(self.relay_log):
            self.problems.append(
                "the relay did not see the handler exit (it was killed: SIGKILL after SIGTERM, section 13.3)"
            )
        return stats


def report(name: str, run: Run, stats: Dict) -> int:
    finished = run.finished or {}
    error = finished.get("error")
    if error and error.get("code") in ("handler-failed", "handler-error", "protocol-error"):
        run.problems.append(f"broadcastd finished the broadcast with {error['code']}: {error['message']}")
    print(f"broadcastd-check-handler: {name}")
    if stats:
        ready = stats.get("ready")
        print(
            f"  READY {ready:.2f} s after launch; {stats['videoSamples']} VIDEO_SAMPLEs, "
            f"{stats['releases']} RELEASE_SLOTs "
            f"(longest held {stats['longestHold']:.2f} s); {stats['commands']} COMMANDs, {stats['answers']} answered"
            + (
                f"; exited {stats['exitAfterFinish']:.2f} s after BROADCAST_FINISHED"
                if "exitAfterFinish" in stats
                else ""
            )
            if ready is not None
            else "  never READY"
        )
    print(f"  went through: {', '.join(run.done) or 'nothing'}")
    if "result" in finished:
        print(f"  its result: {json.dumps(finished['result'], sort_keys=True)[:200]}")
    for note in run.notes:
        print(f"  note: {note}")
    for problem in run.problems:
        print(f"  PROBLEM: {problem}")
    if run.problems:
        tail = run.tail(run.handler_log)
        if tail:
            print("  the handler's last output:\n    " + tail.rstrip("\n").replace("\n", "\n    "))
        print(f"{len(run.problems)} problem(s): {name} does not follow docs/protocol.md")
        return 1
    print(f"no problem: {name} follows docs/protocol.md in everything checked")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="broadcastd-check-handler",
        description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 nothing wrong, 1 problems found, 2 the check could not run.",
    )
    parser.add_argument("name", help="the handler's manifest name")
    parser.add_argument("--broadcastd", help="the broadcastd to run (default: the one on PATH)")
    parser.add_argument(
        "--handlers-dir", action="append", default=[], metavar="DIR", help="where its manifest is (first)"
    )
    parser.add_argument(
        "--url", help="the broadcast URL (default: a file in the check's folder when the manifest needs one)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setup value")
    parser.add_argument(
        "--command",
        action="append",
        default=[],
        metavar="'NAME KEY=VALUE…'",
        help="a command to send (default: each listed command that needs no argument)",
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="live time before the pause (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the check's folder (logs) and say where")
    args = parser.parse_args(argv)
    daemon = args.broadcastd or shutil.which("broadcastd")
    if not daemon or not os.access(daemon, os.X_OK):
        print(
            "broadcastd-check-handler: no broadcastd to run: give --broadcastd PATH or put it on PATH", file=sys.stderr
        )
        return 2
    run = None
    try:
        if any("=" not in kv for kv in args.set):
            raise CheckError("--set takes KEY=VALUE")
        manifest_path, manifest = find_manifest(args.name, manifest_directories(args.handlers_dir, daemon))
        run = Run(args, daemon, manifest_path, manifest)
        try:
            run.broadcast()
        finally:
            run.stop()
        return report(args.name, run, run.relay_findings())
    except (CheckError, DaemonError, OSError) as e:
        print(f"broadcastd-check-handler: the check could not run: {e}", file=sys.stderr)
        if run is not None:
            print(run.tail(run.daemon_log), file=sys.stderr)
        return 2
    finally:
        if run is not None:
            if args.keep:
                print(f"logs: {run.folder}", file=sys.stderr)
            else:
                shutil.rmtree(run.folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
