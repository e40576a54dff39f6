"""The conformance check's relay: broadcastd launches it as the handler, it launches the real handler on a socket pair
of its own and passes every message both ways, checking what the handler does against docs/protocol.md. Each
finding is one JSON line in the log the check reads: {"problem": text} breaks a rule, {"note": text} is worth
knowing, {"stats": {...}} ends it."""

import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import time
from typing import Dict, List, Optional, Tuple

from .wire import (
    BROADCAST_FINISHED,
    BROADCAST_STARTED,
    COMMAND,
    COMMAND_ANSWER,
    ERROR,
    HELLO,
    OPCODE_NAMES,
    POOL,
    READY,
    RELEASE_SLOT,
    VIDEO_SAMPLE,
    Connection,
    ConnectionClosed,
    Message,
    ProtocolError,
    _close_quietly,
)

START_TIMEOUT = 10.0  # docs/protocol.md section 6
FINISH_TIMEOUT = 5.0
COMMAND_TIMEOUT = 10.0
HANG_TIMEOUT = 10.0
#: A frame still held when BROADCAST_FINISHED comes, delivered longer ago than this, was never going to be released.
STALE_AT_FINISH = 1.0


def resolve(manifest: Dict, manifest_dir: str, daemon: str) -> str:
    """The handler's program, found as broadcastd finds it (docs/protocol.md section 16, `exec`)."""
    program = manifest["exec"]
    if program.startswith("/"):
        return program
    if "/" in program:
        return os.path.normpath(os.path.join(manifest_dir, program))
    beside = os.path.join(os.path.dirname(daemon), program)
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which(program) or program


class Checker:
    """What the handler did, message by message, against the rules; findings go to `log` as they are made."""

    def __init__(self, log, description: Dict):
        self.log = log
        self.started = time.monotonic()
        self.handler_sends = {
            int(m["opcode"], 16): m
            for m in description["messages"]
            if m["direction"] == "to-daemon" and "handler" in m["roles"]
        }
        self.objects = description["objects"]
        self.limits = {limit["name"]: limit.get("value") for limit in description["limits"]}
        self.said_hello = False
        self.broadcast_started: Optional[float] = None
        self.ready_at: Optional[float] = None
        self.finished_at: Optional[float] = None
        self.pools: Dict[int, bool] = {}  # pool id -> current
        self.held: Dict[Tuple[int, int], List[float]] = {}  # (pool, slot) -> delivery times
        self.released_once: set = set()
        self.commands: Dict[int, Tuple[str, float]] = {}
        self.answered: set = set()
        self.stats = {"videoSamples": 0, "releases": 0, "commands": 0, "answers": 0, "longestHold": 0.0}

    def now(self) -> float:
        return time.monotonic() - self.started

    def write(self, kind: str, text) -> None:
        self.log.write(json.dumps({kind: text}) + "\n")
        self.log.flush()

    def problem(self, text: str) -> None:
        self.write("problem", text)

    def note(self, text: str) -> None:
        self.write("note", text)

    # broadcastd to the handler

    def down(self, message: Message) -> None:
        op = message.opcode
        if op == POOL:
            pool = int(message.json()["pool"])
            self.pools = {key: False for key in self.pools}
            self.pools[pool] = True
        elif op == BROADCAST_STARTED:
            self.broadcast_started = self.now()
        elif op == VIDEO_SAMPLE and len(message.payload) == 56:
            pool, slot = struct.unpack_from("<II", message.payload, 32)
            self.held.setdefault((pool, slot), []).append(self.now())
            self.stats["videoSamples"] += 1
        elif op == COMMAND:
            command = message.json()
            self.commands[int(command["id"])] = (str(command["command"]), self.now())
            self.stats["commands"] += 1
        elif op == BROADCAST_FINISHED:
            self.finished_at = self.now()
            stale = [
                (key, t) for key, times in self.held.items() for t in times if self.finished_at - t > STALE_AT_FINISH
            ]
            if stale:
                (pool, slot), t = stale[0]
                self.problem(
                    f"{len(stale)} VIDEO_SAMPLE(s) were never released, the first (slot {slot} of pool {pool}) "
                    f"delivered {self.finished_at - t:.1f} s before BROADCAST_FINISHED "
                    "(section 8.5: every VIDEO_SAMPLE "
                    "hands the handler one pool slot that it MUST give back with RELEASE_SLOT, once per VIDEO_SAMPLE)"
                )
        elif op == ERROR:
            error = message.json()
            if error.get("code") == "unsupported":
                self.note(f"broadcastd answered a message it does not know: {error.get('message')}")
            else:
                self.problem(f"broadcastd disconnected the handler: {error.get('code')}: {error.get('message')}")

    # the handler to broadcastd

    def up(self, message: Message) -> None:
        op, name = message.opcode, OPCODE_NAMES.get(message.opcode, f"0x{message.opcode:04x}")
        declared = self.handler_sends.get(op, {}).get("descriptors", 0)  # SHARE_RING (2.9, broadcastd's encoder)
        if len(message.fds) != declared:
            self.problem(
                f"{name} came with {len(message.fds)} descriptor(s) (section 4: peers MUST send fds = 0"
                + (f"; {name} carries {declared}" if declared else "")
                + ")"
            )
        if not self.said_hello:
            self.said_hello = True
            if op != HELLO:
                self.problem(
                    f"its first message was {name}, not HELLO (section 7: the first message a peer sends MUST be HELLO)"
                )
                return
            hello = self.payload(message, HELLO)
            if hello is not None and hello.get("role") != "handler":
                self.problem(
                    f"HELLO said role {hello.get('role')!r} "
                    "(section 2: a peer on the handler socket must say role handler)"
                )
            if hello is not None and hello.get("protocol") != 2:
                self.note(f"HELLO said protocol {hello.get('protocol')!r}; the current version is 2 (section 7)")
            return
        if op == HELLO:
            return self.problem(
                "it sent a second HELLO (section 7: HELLO is sent once; a second HELLO is a protocol violation)"
            )
        if op not in self.handler_sends:
            known = op in OPCODE_NAMES
            return (self.problem if known else self.note)(
                f"it sent {name}, "
                + (
                    "which handlers may not send (section 8.1: an opcode that is not one of its role's →D "
                    "messages is a protocol violation)"
                    if known
                    else "an opcode broadcastd does not know"
                )
            )
        if op == READY:
            self.ready(message)
        elif op == RELEASE_SLOT:
            self.release(message)
        else:
            payload = self.payload(message, op)
            if op == COMMAND_ANSWER and payload is not None:
                self.answer(payload)

    def ready(self, message: Message) -> None:
        if self.broadcast_started is None:
            return self.problem(
                "it sent READY before BROADCAST_STARTED (section 8.5: send it exactly once, after BROADCAST_STARTED)"
            )
        if self.ready_at is not None:
            return self.problem("it sent READY twice (section 8.5: a second READY is a protocol violation)")
        self.ready_at = self.now()
        if self.ready_at > START_TIMEOUT:
            self.problem(
                f"READY came {self.ready_at:.1f} s after launch (section 6: it must come within {START_TIMEOUT:.0f} s)"
            )

    def release(self, message: Message) -> None:
        if len(message.payload) != 8:
            return self.problem(f"RELEASE_SLOT of {len(message.payload)} bytes (section 10.4: exactly 8 bytes)")
        pool, slot = struct.unpack("<II", message.payload)
        self.stats["releases"] += 1
        times = self.held.get((pool, slot))
        if times:
            held = self.now() - times.pop(0)
            self.stats["longestHold"] = max(self.stats["longestHold"], round(held, 3))
            if held > HANG_TIMEOUT:
                self.problem(
                    f"it held slot {slot} of pool {pool} for {held:.1f} s (section 6: a handler that holds slots and "
                    f"releases none for {HANG_TIMEOUT:.0f} s has hung)"
                )
            self.released_once.add((pool, slot))
            return
        if pool in self.pools and not self.pools[pool]:
            return  # a pool replaced since: in-flight releases are accepted and ignored (section 8.5)
        why = (
            "wrong pool: no POOL announced it"
            if pool not in self.pools
            else "already released" if (pool, slot) in self.released_once else "never delivered"
        )
        self.problem(
            f"RELEASE_SLOT of slot {slot} of pool {pool}, which it did not hold ({why}): section 8.5: releasing a slot "
            "the handler does not hold (never delivered, already released, wrong pool) is a protocol violation"
        )

    def answer(self, payload: Dict) -> None:
        command_id = payload.get("id")
        command = self.commands.get(command_id) if isinstance(command_id, int) else None
        if command is None:
            return self.problem(f"COMMAND_ANSWER for id {command_id!r}, which no COMMAND had (section 8.6)")
        if command_id in self.answered:
            return self.problem(
                f"COMMAND_ANSWER for id {command_id} ('{command[0]}') came twice (section 8.6: it answers a "
                "COMMAND once)"
            )
        self.answered.add(command_id)
        self.stats["answers"] += 1
        if "result" in payload and "error" in payload:
            self.problem(
                f"COMMAND_ANSWER {command_id} has both result and error (section 8.6: with result or with error)"
            )
        late = self.now() - command[1]
        if late > COMMAND_TIMEOUT:
            self.problem(f"'{command[0]}' was answered after {late:.1f} s (section 6: within {COMMAND_TIMEOUT:.0f} s)")

    def payload(self, message: Message, op: int) -> Optional[Dict]:
        """The JSON payload checked against protocol.json and the limits of section 6; None when it is not an object."""
        entry = self.handler_sends.get(op) or {"name": "HELLO", "payload": {"kind": "json", "fields": []}}
        name = entry["name"]
        if op != HELLO and entry["payload"]["kind"] != "json":
            return None
        limit = {
            "SET_RESULT": "maxResultPayload",
            "UPDATE_SERVICE_INFO": "maxServiceInfoPayload",
            "COMMAND_ANSWER": "maxCommandAnswerPayload",
        }.get(name)
        if limit and len(message.payload) > self.limits[limit]:
            self.problem(f"{name} of {len(message.payload)} bytes (section 6: at most {self.limits[limit]})")
        try:
            payload = message.json()
        except ProtocolError as e:
            self.problem(f"{name}'s payload is not a JSON object (section 5: a protocol violation): {e}")
            return None
        fields = entry["payload"].get("fields")
        if fields is None and entry["payload"].get("object"):
            fields = self.objects[entry["payload"]["object"]]["fields"]
        for problem in check_fields(payload, fields or [], self.objects):
            self.problem(f"{name} {problem} (section 8.5, as protocol.json declares it)")
        if name == "UPDATE_SERVICE_INFO" and isinstance(payload.get("info"), dict):
            info = payload["info"]
            nested = [key for key, value in info.items() if isinstance(value, (dict, list))]
            if nested:
                self.problem(
                    f"UPDATE_SERVICE_INFO's info holds nested values ({', '.join(sorted(nested))}): section 8.5: "
                    "nested objects and arrays are a protocol violation"
                )
            if len(info) > self.limits["maxServiceInfoKeys"]:
                self.problem(
                    f"UPDATE_SERVICE_INFO with {len(info)} keys "
                    f"(section 6: at most {self.limits['maxServiceInfoKeys']})"
                )
        if name == "UPDATE_URL" and isinstance(payload.get("url"), str):
            url = payload["url"]
            if len(url.encode()) > self.limits["maxURLBytes"] or any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
                self.problem("UPDATE_URL's url is over 8 192 bytes or holds a control character (section 6)")
        return payload

    def exited(self, status: int, how: str, stopped: bool) -> None:
        at = self.now()
        if self.finished_at is None and stopped:
            self.note(f"broadcastd stopped the handler before BROADCAST_FINISHED (SIGTERM); it {how}")
        elif self.finished_at is None:
            self.problem(
                f"the handler {how} before BROADCAST_FINISHED (section 13.3: a handler that exits before "
                "BROADCAST_FINISHED fails the broadcast)"
            )
        else:
            took = at - self.finished_at
            self.stats["exitAfterFinish"] = round(took, 3)
            if status != 0:
                self.problem(
                    f"the handler {how} after BROADCAST_FINISHED (section 13.3: it SHOULD exit with status 0 after "
                    "BROADCAST_FINISHED)"
                )
            elif took > FINISH_TIMEOUT:
                self.problem(
                    f"the handler exited {took:.1f} s after BROADCAST_FINISHED "
                    f"(section 6: within {FINISH_TIMEOUT:.0f} s)"
                )
        for command_id, (name, _) in sorted(self.commands.items()):
            if command_id not in self.answered:
                self.problem(
                    f"COMMAND {command_id} ('{name}') was never answered (section 8.6: it answers a COMMAND once)"
                )
        if self.broadcast_started is not None and self.ready_at is None:
            self.problem("it never sent READY (section 8.5: send it exactly once, after BROADCAST_STARTED)")
        self.stats["ready"] = None if self.ready_at is None else round(self.ready_at, 3)
        self.write("stats", self.stats)


JSON_TYPES = {"string": str, "bool": bool, "object": dict, "array": list, "number": (int, float)}


def check_fields(payload: Dict, fields: List[Dict], objects: Dict, path: str = "") -> List[str]:
    """What is wrong with `payload` against the declared `fields`: missing required ones, values of the wrong type."""
    problems = []
    for field in fields:
        key = path + field["name"]
        if field["name"] not in payload:
            if field.get("required"):
                problems.append(f"lacks the required field '{key}'")
            continue
        value, kind = payload[field["name"]], field["type"]
        if kind == "any":
            continue
        if kind == "integer":
            ok = (
                isinstance(value, int) and not isinstance(value, bool) and value >= 0
                if field.get("format")
                else isinstance(value, int) and not isinstance(value, bool)
            )
        else:
            ok = isinstance(value, JSON_TYPES[kind]) and not (kind == "number" and isinstance(value, bool))
        if not ok:
            problems.append(f"has '{key}' of the wrong type ({json.dumps(value)[:40]}, declared {kind})")
            continue
        problems += check_bounds(key, value, field)
        if kind == "object" and field.get("object") in objects:
            problems += check_fields(value, objects[field["object"]]["fields"], objects, key + ".")
    return problems


def check_bounds(key: str, value, field: Dict) -> List[str]:
    """What `value` breaks of the bounds its field declares (maxBytes, maxItems, maxKeyBytes, maxValueBytes, min,
    max: protocol.json's `about`)."""

    def size(text) -> int:
        return len(text.encode()) if isinstance(text, str) else 0

    problems = []
    if "maxBytes" in field and size(value) > field["maxBytes"]:
        problems.append(f"has '{key}' of {size(value)} bytes (at most {field['maxBytes']})")
    if "maxItems" in field and isinstance(value, (list, dict)) and len(value) > field["maxItems"]:
        problems.append(f"has '{key}' of {len(value)} entries (at most {field['maxItems']})")
    if isinstance(value, dict) and "maxKeyBytes" in field:
        if any(not 1 <= size(name) <= field["maxKeyBytes"] for name in value):
            problems.append(f"has a name in '{key}' that is empty or over {field['maxKeyBytes']} bytes")
    if isinstance(value, dict) and "maxValueBytes" in field:
        if any(size(entry) > field["maxValueBytes"] for entry in value.values()):
            problems.append(f"has a value in '{key}' over {field['maxValueBytes']} bytes")
    if isinstance(value, int) and not field.get("min", value) <= value <= field.get("max", value):
        problems.append(f"has '{key}' = {value}, outside {field.get('min')} … {field.get('max')}")
    return problems


def relay_main(argv: List[str]) -> int:
    """`--relay MANIFEST --log FILE --daemon BROADCASTD --handler-log FILE --description FILE`, as the check
    launches it."""
    args = dict(zip(argv[0::2], argv[1::2]))
    with open(args["--relay"], encoding="utf-8") as f:
        manifest = json.load(f)
    with open(args["--description"], encoding="utf-8") as f:
        description = json.load(f)
    log = open(args["--log"], "a", encoding="utf-8")
    checker = Checker(log, description)
    program = resolve(manifest, os.path.dirname(os.path.abspath(args["--relay"])), args["--daemon"])
    # broadcastd's socket leaves fd 3, where the handler's goes.
    daemon_fd = os.dup(int(os.environ.get("BROADCASTD_HANDLER_FD", "3")))
    os.close(3)
    daemon = Connection(socket.socket(fileno=daemon_fd))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    output = os.open(args["--handler-log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        pid = os.posix_spawn(
            program,
            [program] + list(manifest.get("arguments") or []),
            dict(os.environ, BROADCASTD_HANDLER_FD="3"),
            file_actions=[
                (os.POSIX_SPAWN_DUP2, theirs.fileno(), 3),
                (os.POSIX_SPAWN_DUP2, output, 1),
                (os.POSIX_SPAWN_DUP2, output, 2),
            ],
        )
    except OSError as e:
        checker.problem(f"its program {program} cannot be started: {e} (section 16: exec must be executable)")
        checker.write("stats", checker.stats)
        return 1
    theirs.close()
    os.close(output)
    handler = Connection(ours)
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(time.monotonic()))
    return pass_messages(checker, daemon, handler, pid, stopped)


def pass_messages(checker: Checker, daemon: Connection, handler: Connection, pid: int, stopped: List[float]) -> int:
    """Passes messages both ways until the handler exits; exits as it did."""
    open_sockets = {
        daemon.sock.fileno(): (daemon, handler, checker.down),
        handler.sock.fileno(): (handler, daemon, checker.up),
    }
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        ready = select.select(list(open_sockets), [], [], 0.05)[0] if open_sockets else (time.sleep(0.05) or [])
        for fd in ready:
            source, target, observe = open_sockets[fd]
            try:
                messages = source.fill_once()
            except (ConnectionClosed, ProtocolError, OSError):
                messages = None
            for message in messages or []:
                observe(message)
                try:
                    if not target.closed:
                        target.send(message.opcode, message.payload, message.seq, tuple(message.fds))
                except (ConnectionClosed, OSError):
                    pass
                for descriptor in message.fds:
                    _close_quietly(descriptor)
            if messages is None:  # one side hung up: the other is told the same way
                del open_sockets[fd]
                if not target.closed:
                    open_sockets.pop(target.sock.fileno(), None)
                    target.close()
                source.close()
    how = (
        f"was killed by signal {os.WTERMSIG(status)}"
        if os.WIFSIGNALED(status)
        else f"exited with status {os.WEXITSTATUS(status)}"
    )
    checker.exited(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status), how, bool(stopped))
    for connection in (daemon, handler):
        if not connection.closed:
            connection.close()
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(relay_main(sys.argv[1:]))
