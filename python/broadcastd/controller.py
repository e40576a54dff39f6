"""Controllers and setup UIs: what talks to broadcastd's listening socket (docs/protocol.md sections 2, 7, 8.3, 8.4).

    import broadcastd

    with broadcastd.Controller(client="my-tool") as controller:
        if controller.offers("commands"):
            ...
        broadcast, warning = controller.start("record")
        with broadcastd.Setup() as setup:
            setup.complete_setup(broadcast, url="/tmp/a.mkv")
        controller.send_command("mark", {"title": "here"}, broadcast=broadcast)
        controller.finish(broadcast)

Replies are matched by `seq`; events that arrive meanwhile wait for `next_event`. A refusal raises `DaemonError`
with its code and message; what the daemon announced it does not offer raises `Unsupported` before anything is sent.
"""

import mmap
import os
import socket
import struct
from typing import Dict, List, Optional, Tuple

from .wire import (
    CANCEL_SETUP,
    CHANGE_CAPTURE,
    COMMAND_RESULT,
    COMPLETE_SETUP,
    ERROR,
    FINISH,
    FINISHED,
    GET_SETUP_REQUEST,
    GET_SNAPSHOT,
    GET_STATUS,
    HELLO,
    LIST_HANDLERS,
    LIST_SOURCES,
    PAUSE,
    PROTOCOL_VERSION,
    RESUME,
    SEND_COMMAND,
    SERVICE_INFO,
    START,
    STATE_CHANGED,
    SUBSCRIBE,
    URL_UPDATED,
    WELCOME,
    Announcements,
    Connection,
    DaemonError,
    Message,
    ProtocolError,
    _close_quietly,
    encode_json,
)

EVENTS = {STATE_CHANGED: "stateChanged", SERVICE_INFO: "serviceInfo", URL_UPDATED: "urlUpdated", FINISHED: "finished"}


class NotRunning(DaemonError):
    """Nothing listens on the socket (broadcastd is not running), or what listens is another user's."""

    def __init__(self, message: str):
        super().__init__("not-running", message)


class Unsupported(DaemonError):
    """The daemon announced that it does not offer what was asked (revision 2.6: WELCOME's `features`)."""

    def __init__(self, message: str):
        super().__init__("unsupported", message)


def socket_path(path: Optional[str] = None) -> str:
    """The listening socket: `path`, else $BROADCASTD_SOCKET, else $XDG_RUNTIME_DIR/broadcastd/broadcastd.sock."""
    if path:
        return path
    if os.environ.get("BROADCASTD_SOCKET"):
        return os.environ["BROADCASTD_SOCKET"]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return os.path.join(runtime, "broadcastd", "broadcastd.sock")


class Client(Announcements):
    """One connection to the listening socket, in one role: HELLO said, WELCOME kept."""

    role = "controller"

    def __init__(self, path: Optional[str] = None, client: str = "python-broadcastd"):
        path = socket_path(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            raise NotRunning(f"broadcastd is not running (nothing listens on {path})") from None
        # Only a server of this user is talked to (section 2): another's would read every request.
        pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if uid != os.getuid():
            sock.close()
            raise NotRunning(f"refusing to talk to what listens on {path}: user {uid}'s program (pid {pid}), not yours")
        self.connection = Connection(sock)
        self._events: List[Message] = []
        self.welcome = self.request(HELLO, {"client": client, "protocol": PROTOCOL_VERSION, "role": self.role}).json()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self.connection.close()

    def require(self, feature: str, what: str) -> None:
        """Raises Unsupported, before anything is sent, when the daemon announced it does not offer `feature`."""
        if self.offers(feature) is False:
            raise Unsupported(
                f"{self.welcome.get('server', 'broadcastd')} (protocol revision {self.revision}) does not offer "
                f"{what}: its WELCOME does not list the feature {feature!r}"
            )

    def request(self, opcode: int, payload: Optional[Dict] = None) -> Message:
        """Sends a request and returns its reply; ERROR raises DaemonError. Events meanwhile wait for next_event."""
        seq = self.connection.next_seq()
        self.connection.send(opcode, encode_json(payload if payload is not None else {}), seq)
        while True:
            message = self.connection.receive()
            if message.seq == seq and message.opcode == ERROR:
                error = message.json()
                raise DaemonError(str(error.get("code")), str(error.get("message")))
            if message.seq == seq:
                if opcode == HELLO and message.opcode != WELCOME:
                    raise ProtocolError(f"expected WELCOME in answer to HELLO, not {message.name}")
                return message
            if message.opcode == ERROR:  # said before closing (seq 0): a refusal of this connection
                error = message.json()
                raise DaemonError(str(error.get("code")), str(error.get("message")))
            if message.opcode in EVENTS:
                self._events.append(message)
            for fd in message.fds:  # a message of a later revision: skipped
                _close_quietly(fd)

    def next_event(self, timeout: Optional[float] = None) -> Optional[Tuple[str, Dict]]:
        """The next event as (name, payload), name one of stateChanged, serviceInfo, urlUpdated, finished; None when
        none
        came within `timeout` seconds (None: wait as long as it takes)."""
        while not self._events:
            message = self.connection.receive(timeout)
            if message is None:
                return None
            if message.opcode == ERROR:
                error = message.json()
                raise DaemonError(str(error.get("code")), str(error.get("message")))
            if message.opcode in EVENTS:
                self._events.append(message)
            for fd in message.fds:
                _close_quietly(fd)
        message = self._events.pop(0)
        return EVENTS[message.opcode], message.json()


def _reference(broadcast: Optional[int]) -> Dict:
    return {} if broadcast is None else {"broadcast": broadcast}


class Controller(Client):
    """A controller: lists handlers, starts, pauses, resumes and finishes broadcasts, sends commands, reads status."""

    role = "controller"

    def list_handlers(self) -> List[Dict]:
        return self.request(LIST_HANDLERS).json()["handlers"]

    def start(
        self, handler: str, max_duration: Optional[float] = None, capture: Optional[Dict] = None
    ) -> Tuple[int, Optional[str]]:
        """Asks for a broadcast (it then waits for a setup UI); its id, and the daemon's warning about it, if any."""
        payload: Dict = {"handler": handler}
        if max_duration is not None:
            payload["maxDuration"] = max_duration
        if capture:
            self.require("capture-choice", "choosing a broadcast's capture")
            payload["capture"] = capture
        answer = self.request(START, payload).json()
        return int(answer["broadcast"]), answer.get("warning")

    def pause(self, broadcast: Optional[int] = None) -> Optional[int]:
        return self.request(PAUSE, _reference(broadcast)).json().get("broadcast")

    def resume(self, broadcast: Optional[int] = None) -> Optional[int]:
        return self.request(RESUME, _reference(broadcast)).json().get("broadcast")

    def finish(self, broadcast: Optional[int] = None, discard: bool = False) -> Optional[int]:
        payload = _reference(broadcast)
        if discard:
            payload["discard"] = True
        return self.request(FINISH, payload).json().get("broadcast")

    def status(self) -> Dict:
        return self.request(GET_STATUS).json()

    def subscribe(self) -> None:
        """From now on `next_event` returns state changes, service info, URL updates and finishes."""
        self.request(SUBSCRIBE)

    def list_sources(self) -> Dict:
        return self.request(LIST_SOURCES).json()

    def change_capture(self, output: Optional[str] = None, region: Optional[str] = None) -> None:
        """The running capture takes `output` or `region` (neither: the whole screen), for every broadcast."""
        self.require("capture-change", "changing the running capture")
        payload = {key: value for key, value in (("output", output), ("region", region)) if value is not None}
        self.request(CHANGE_CAPTURE, payload)

    def send_command(self, command: str, arguments: Optional[Dict] = None, broadcast: Optional[int] = None) -> Dict:
        """Sends a command to a broadcast's handler and returns its result; the handler's error raises DaemonError
        (command-failed, command-timeout)."""
        self.require("commands", "commands")
        payload = dict(_reference(broadcast), command=command)
        if arguments:
            payload["arguments"] = arguments
        reply = self.request(SEND_COMMAND, payload)
        if reply.opcode != COMMAND_RESULT:
            raise ProtocolError(f"expected COMMAND_RESULT, not {reply.name}")
        return reply.json()["result"]

    def snapshot(self, broadcast: Optional[int] = None) -> Tuple[Dict, bytes]:
        """The current frame: SNAPSHOT's description, and the frame's bytes (laid out as description["video"] says)."""
        reply = self.request(GET_SNAPSHOT, _reference(broadcast))
        if len(reply.fds) != 1:
            for fd in reply.fds:
                _close_quietly(fd)
            raise ProtocolError(f"a snapshot comes with one descriptor, not {len(reply.fds)}")
        description = reply.json()
        try:
            size = int(description["video"]["frameSize"])
            with mmap.mmap(reply.fds[0], size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) as frame:
                return description, bytes(frame)
        finally:
            _close_quietly(reply.fds[0])


class Setup(Client):
    """A setup UI: fetches the pending setup request and completes or cancels it."""

    role = "setup"

    def get_setup_request(self, broadcast: Optional[int] = None) -> Dict:
        return self.request(GET_SETUP_REQUEST, _reference(broadcast)).json()

    def complete_setup(
        self, broadcast: int, url: Optional[str] = None, setup_info: Optional[Dict[str, str]] = None
    ) -> None:
        payload: Dict = {"broadcast": broadcast, "setupInfo": dict(setup_info or {})}
        if url:
            payload["url"] = url
        self.request(COMPLETE_SETUP, payload)

    def cancel_setup(self, broadcast: int, message: str, code: str = "setup-cancelled") -> None:
        self.request(CANCEL_SETUP, {"broadcast": broadcast, "error": {"code": code, "message": message}})
