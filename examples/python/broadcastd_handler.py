"""A small broadcastd sample-handler library, written from docs/protocol.md (version 1).

Standard library only, Python 3.9+. Subclass `SampleHandler`, then call `run(handler)`:

    import broadcastd_handler as bd

    class MyHandler(bd.SampleHandler):
        def broadcast_started(self, setup_info):
            ...
        def process_sample(self, kind, header, data):
            ...   # kind: "video", "audioApp" or "audioMic"; data: a memoryview

    bd.run(MyHandler())

`run` connects over the socket broadcastd passed in fd 3 (BROADCASTD_HANDLER_FD), says HELLO,
maps the frame pool, calls the callbacks, sends READY after `broadcast_started` returns and
RELEASE_SLOT after every video callback, and exits: 0 after BROADCAST_FINISHED, 1 when the daemon
closes the connection or sends ERROR. A broadcast that started always gets its
`broadcast_finished`: when the connection ends first (broadcastd was killed), it comes with that
reason as the error, so that a handler can still close what it wrote.

Rules from ReplayKit that still hold: return from callbacks quickly, and do not keep `data` past
`process_sample` (video data lives in a shared pool slot that broadcastd reuses once released).
"""

import array
import json
import mmap
import os
import socket
import struct
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Tuple

PROTOCOL_VERSION = 1
HEADER = struct.Struct("<IHHI")  # size, opcode, descriptor count, seq
HEADER_SIZE = HEADER.size  # 12
MAX_PAYLOAD = 1 << 20
MAX_DESCRIPTORS = 4
MAX_RESULT_PAYLOAD = 64 << 10  # SET_RESULT
MAX_SERVICE_INFO_PAYLOAD = 16 << 10  # UPDATE_SERVICE_INFO
MAX_SERVICE_INFO_KEYS = 64
MAX_URL_BYTES = 8 << 10  # UPDATE_URL
MAX_COMMAND_ANSWER_PAYLOAD = 64 << 10  # COMMAND_ANSWER (revision 2.3)

# Opcodes (docs/protocol.md, section 8.1)
HELLO = 0x0001
WELCOME = 0x0002
OK = 0x0003
ERROR = 0x0004
POOL = 0x0300
BROADCAST_STARTED = 0x0301
BROADCAST_PAUSED = 0x0302
BROADCAST_RESUMED = 0x0303
BROADCAST_FINISHED = 0x0304
VIDEO_FORMAT_CHANGED = 0x0305
COMMAND = 0x0306  # revision 2.3
VIDEO_SAMPLE = 0x0310
AUDIO_SAMPLE = 0x0311
CURSOR = 0x0312
READY = 0x0380
RELEASE_SLOT = 0x0381
FINISH_WITH_ERROR = 0x0382
UPDATE_URL = 0x0383
UPDATE_SERVICE_INFO = 0x0384
SET_RESULT = 0x0385
COMMAND_ANSWER = 0x0386  # revision 2.3

OPCODE_NAMES = {
    HELLO: "HELLO", WELCOME: "WELCOME", OK: "OK", ERROR: "ERROR", POOL: "POOL",
    BROADCAST_STARTED: "BROADCAST_STARTED", BROADCAST_PAUSED: "BROADCAST_PAUSED",
    BROADCAST_RESUMED: "BROADCAST_RESUMED", BROADCAST_FINISHED: "BROADCAST_FINISHED",
    VIDEO_FORMAT_CHANGED: "VIDEO_FORMAT_CHANGED", VIDEO_SAMPLE: "VIDEO_SAMPLE", AUDIO_SAMPLE: "AUDIO_SAMPLE", CURSOR: "CURSOR",
    READY: "READY", RELEASE_SLOT: "RELEASE_SLOT", FINISH_WITH_ERROR: "FINISH_WITH_ERROR",
    UPDATE_URL: "UPDATE_URL", UPDATE_SERVICE_INFO: "UPDATE_SERVICE_INFO", SET_RESULT: "SET_RESULT",
    COMMAND: "COMMAND", COMMAND_ANSWER: "COMMAND_ANSWER",
}

SAMPLE_TYPES = {1: "video", 2: "audioApp", 3: "audioMic"}
AUDIO_FORMATS = {1: ("f32", 4), 2: ("s16", 2)}
DISCONTINUITY = 1
REPEATED = 2  # VIDEO_SAMPLE only: same picture as the previous sample

_TIMING = struct.Struct("<QQQI")  # pts, duration, sequence, flags: 28 bytes
_VIDEO = struct.Struct("<QQQIHBBIIIIII")  # 56 bytes
_AUDIO = struct.Struct("<QQQIBBBBII")  # 40 bytes
_CURSOR = struct.Struct("<QiiIHHHH")  # pts, x, y, flags, sprite width, height, hotspot x, y: 28 bytes
_RELEASE = struct.Struct("<II")
assert _VIDEO.size == 56 and _AUDIO.size == 40


class ProtocolError(Exception):
    """The daemon broke the framing or sent something this module cannot read."""


class ConnectionClosed(Exception):
    """The daemon closed the connection."""


class DaemonError(Exception):
    """The daemon sent ERROR {code, message}."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class Message:
    opcode: int
    seq: int
    payload: bytes
    fds: List[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return OPCODE_NAMES.get(self.opcode, f"0x{self.opcode:04x}")

    def json(self) -> dict:
        if not self.payload:
            return {}
        try:
            value = json.loads(self.payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ProtocolError(f"{self.name}: payload is not valid JSON ({e})") from None
        if not isinstance(value, dict):
            raise ProtocolError(f"{self.name}: payload is not a JSON object")
        return value


def encode(opcode: int, payload: bytes = b"", seq: int = 0, fd_count: int = 0) -> bytes:
    """Header and payload as they go on the wire."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    return HEADER.pack(len(payload), opcode, fd_count, seq) + payload


def encode_json(value) -> bytes:
    """Compact JSON with sorted keys, as broadcastd writes it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Connection:
    """Message framing over a Unix stream socket, with descriptors passed as SCM_RIGHTS.

    Receiving reassembles messages split across reads and separates several messages in one
    read; descriptors are queued as they arrive and handed to messages in order.
    """

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()
        self._fds: Deque[int] = deque()
        self._next_seq = 0
        #: Set by close(): requests made after it go nowhere.
        self.closed = False

    @classmethod
    def from_environment(cls) -> "Connection":
        value = os.environ.get("BROADCASTD_HANDLER_FD")
        if not value:
            raise ProtocolError("BROADCASTD_HANDLER_FD is not set: handlers are started by broadcastd")
        try:
            fd = int(value)
        except ValueError:
            raise ProtocolError(f"BROADCASTD_HANDLER_FD={value!r} is not a descriptor number") from None
        sock = socket.socket(fileno=fd)
        sock.setblocking(True)
        return cls(sock)

    def next_seq(self) -> int:
        self._next_seq = self._next_seq % 0xFFFFFFFF + 1
        return self._next_seq

    # Sending

    def send(self, opcode: int, payload: bytes = b"", seq: int = 0, fds: Tuple[int, ...] = ()) -> None:
        data = memoryview(encode(opcode, payload, seq, len(fds)))
        ancillary = []
        if fds:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        # Descriptors go with the first byte; the rest may take several sends.
        try:
            while data:
                sent = self.sock.sendmsg([data], ancillary)
                ancillary = []
                data = data[sent:]
        except (ConnectionResetError, BrokenPipeError):
            raise ConnectionClosed("the connection was closed") from None

    def send_json(self, opcode: int, value, seq: int = 0) -> None:
        self.send(opcode, encode_json(value), seq)

    # Receiving

    def _take(self) -> Optional[Message]:
        if len(self._buffer) < HEADER_SIZE:
            return None
        size, opcode, fd_count, seq = HEADER.unpack_from(self._buffer, 0)
        if size > MAX_PAYLOAD:
            raise ProtocolError(f"message 0x{opcode:04x} of {size} bytes exceeds the limit of {MAX_PAYLOAD}")
        if fd_count > MAX_DESCRIPTORS:
            raise ProtocolError(f"message 0x{opcode:04x} claims {fd_count} descriptors")
        if len(self._buffer) < HEADER_SIZE + size:
            return None
        if len(self._fds) < fd_count:
            raise ProtocolError(f"message 0x{opcode:04x} needs {fd_count} descriptors, {len(self._fds)} arrived")
        payload = bytes(self._buffer[HEADER_SIZE:HEADER_SIZE + size])
        del self._buffer[:HEADER_SIZE + size]
        fds = [self._fds.popleft() for _ in range(fd_count)]
        return Message(opcode, seq, payload, fds)

    def receive(self) -> Message:
        """The next whole message; blocks. Raises ConnectionClosed at end of stream."""
        while True:
            message = self._take()
            if message is not None:
                return message
            self._fill()

    def _fill(self) -> None:
        fd_space = socket.CMSG_SPACE(8 * array.array("i").itemsize)
        try:
            data, ancillary, flags, _ = self.sock.recvmsg(256 * 1024, fd_space)
        except (ConnectionResetError, BrokenPipeError):
            raise ConnectionClosed("the connection was reset") from None
        for level, kind, cdata in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
                for fd in fds:
                    os.set_inheritable(fd, False)
                self._fds.extend(fds)
        if flags & getattr(socket, "MSG_CTRUNC", 0):
            raise ProtocolError("descriptors were truncated")
        if not data:
            if self._buffer:
                raise ConnectionClosed("the connection was closed in the middle of a message")
            raise ConnectionClosed("the connection was closed")
        self._buffer += data

    def close(self) -> None:
        self.closed = True
        for fd in self._fds:
            _close_quietly(fd)
        self._fds.clear()
        self.sock.close()


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


# Samples


@dataclass
class SampleTiming:
    pts: int  # nanoseconds, CLOCK_MONOTONIC
    duration: int  # nanoseconds
    sequence: int  # counts every sample of the stream, dropped ones included
    discontinuity: bool


@dataclass
class Plane:
    offset: int
    stride: int
    height: int


@dataclass
class VideoHeader(SampleTiming):
    orientation: int  # clockwise degrees to show it upright: 0, 90, 180, 270
    mirrored: bool
    pool: int
    slot: int
    width: int
    height: int
    fourcc: int
    byte_count: int
    planes: List[Plane] = field(default_factory=list)  # from BROADCAST_STARTED.video
    repeated: bool = False  # the screen did not change: same picture as the previous sample

    @classmethod
    def decode(cls, payload: bytes) -> "VideoHeader":
        if len(payload) != _VIDEO.size:
            raise ProtocolError(f"VIDEO_SAMPLE payload is {len(payload)} bytes, expected {_VIDEO.size}")
        (pts, duration, sequence, flags, degrees, mirrored, _reserved,
         pool, slot, width, height, fourcc, byte_count) = _VIDEO.unpack(payload)
        if degrees not in (0, 90, 180, 270):
            raise ProtocolError(f"VIDEO_SAMPLE orientation {degrees} is not 0, 90, 180 or 270")
        return cls(pts, duration, sequence, bool(flags & DISCONTINUITY), degrees, mirrored != 0,
                   pool, slot, width, height, fourcc, byte_count, repeated=bool(flags & REPEATED))


@dataclass
class AudioHeader(SampleTiming):
    type: str  # "audioApp" or "audioMic"
    format: str  # "f32" or "s16"
    channels: int
    sample_rate: int
    frame_count: int

    @classmethod
    def decode(cls, payload: bytes) -> "AudioHeader":
        if len(payload) < _AUDIO.size:
            raise ProtocolError(f"AUDIO_SAMPLE payload is {len(payload)} bytes, shorter than its header")
        (pts, duration, sequence, flags, kind, fmt, channels, _reserved,
         rate, frames) = _AUDIO.unpack_from(payload, 0)
        if kind not in (2, 3):
            raise ProtocolError(f"AUDIO_SAMPLE type {kind} is not 2 or 3")
        if fmt not in AUDIO_FORMATS:
            raise ProtocolError(f"AUDIO_SAMPLE format {fmt} is not 1 or 2")
        name, width = AUDIO_FORMATS[fmt]
        if len(payload) != _AUDIO.size + frames * channels * width:
            raise ProtocolError(f"AUDIO_SAMPLE of {frames} frames has {len(payload) - _AUDIO.size} bytes of PCM")
        return cls(pts, duration, sequence, bool(flags & DISCONTINUITY), SAMPLE_TYPES[kind], name,
                   channels, rate, frames)


def release_slot_payload(pool: int, slot: int) -> bytes:
    return _RELEASE.pack(pool, slot)


class FramePool:
    """The shared frame pool from POOL: one memfd of slots * slot_size bytes, mapped read-only."""

    def __init__(self, fd: int, pool: int, slots: int, slot_size: int):
        self.id = pool
        self.slots = slots
        self.slot_size = slot_size
        size = slots * slot_size
        if os.fstat(fd).st_size < size:
            raise ProtocolError(f"the pool file is smaller than {slots} slots of {slot_size} bytes")
        self._map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        self._view = memoryview(self._map)

    def frame(self, slot: int, byte_count: int) -> memoryview:
        if not 0 <= slot < self.slots or byte_count > self.slot_size:
            raise ProtocolError(f"slot {slot} / {byte_count} bytes lies outside the pool")
        start = slot * self.slot_size
        return self._view[start:start + byte_count]

    def close(self) -> None:
        try:
            self._view.release()
            self._map.close()
        except BufferError:
            pass  # someone kept a frame view; the mapping goes with the process


# The handler


class SampleHandler:
    """Override the callbacks you need (ReplayKit's RPBroadcastSampleHandler).

    Callbacks run on the one thread that called `run`. The `finish_with_error`, `update_url`,
    `update_service_info` and `set_broadcast_result` methods may be called from the callbacks.
    """

    #: Sent as HELLO's `client`.
    client_name = os.path.basename(sys.argv[0] or "python-handler")

    def __init__(self):
        self.connection: Optional[Connection] = None
        #: BROADCAST_STARTED as received: broadcast, url, setupInfo, video, audio.
        self.broadcast: Dict = {}

    @property
    def url(self) -> Optional[str]:
        return self.broadcast.get("url")

    # Callbacks

    def broadcast_started(self, setup_info: Dict[str, str]) -> None:
        pass

    def process_sample(self, kind: str, header, data: memoryview) -> None:
        """kind: "video", "audioApp" or "audioMic". header: VideoHeader or AudioHeader.
        data: the frame (video; planes as header.planes) or the interleaved PCM (audio)."""

    def broadcast_paused(self) -> None:
        pass

    def broadcast_resumed(self) -> None:
        pass

    # Protocol revision 1.2: True in `broadcast_finished` when the user discarded the broadcast
    # (`broadcastctl discard`): delete what it produced and say {"discarded": True} in the result.
    # Comes only to handlers whose manifest says "discard": true.
    discard = False

    def broadcast_finished(self, error: Optional[Dict[str, str]]) -> None:
        """error: {"code", "message"} when the broadcast ends with an error, else None. See `discard`."""

    def video_format_changed(self, video: Dict) -> None:
        pass

    def cursor(self, pts: int, x: int, y: int, visible: bool, sprite: Optional[Dict]) -> None:
        """With `broadcastd --cursor metadata`: the hotspot in frame coordinates, every frame; `sprite`
        ({width, height, hotspot_x, hotspot_y, argb: bytes}, premultiplied) only when it changed."""

    # Protocol revision 2.3: commands from controllers (`broadcastctl send NAME KEY=VALUE...`), those the
    # manifest's "commands" lists, their arguments checked (and converted to the declared types) by broadcastd.

    def handle_command(self, name: str, arguments: Dict) -> Optional[Dict]:
        """Return the result (a dict) for the controller, or raise: the exception's text goes back to it.
        Return None to answer later with `answer_command(self.command_id, ...)` (from any thread), for work
        that takes long; broadcastd gives up waiting after 10 s. The default refuses every command."""
        raise ValueError(f"this handler takes no command {name!r}")

    #: The id of the command `handle_command` was called for.
    command_id = 0

    def answer_command(self, command_id: int, result: Optional[Dict] = None, error: Optional[str] = None) -> None:
        """Answers command `command_id` with `result`, or with `error` (a message for the user)."""
        answer = {"id": command_id}
        if error is not None:
            answer["error"] = {"message": str(error)[:8192]}
        else:
            answer["result"] = result or {}
        payload = encode_json(answer)
        if len(payload) > MAX_COMMAND_ANSWER_PAYLOAD:
            payload = encode_json({"id": command_id, "error": {"message": f"the result was too large ({len(payload)} bytes)"}})
        self._send(COMMAND_ANSWER, payload)

    # Requests to the daemon

    def _send(self, opcode: int, payload: bytes) -> None:
        if self.connection is None:
            raise RuntimeError("not connected to broadcastd (call run(handler))")
        if not self.connection.closed:  # else broadcastd went away: nobody is left to tell
            self.connection.send(opcode, payload)

    def finish_with_error(self, message: str, code: str = "handler-error") -> None:
        """Ends the broadcast with an error (ReplayKit's finishBroadcastWithError)."""
        self._send(FINISH_WITH_ERROR, encode_json({"code": code, "message": message}))

    def update_url(self, url: str) -> None:
        """At most 8 KiB (UTF-8), without control characters."""
        if len(url.encode()) > MAX_URL_BYTES or any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
            raise ValueError(f"a URL is at most {MAX_URL_BYTES} bytes, without control characters")
        self._send(UPDATE_URL, encode_json({"url": url}))

    def update_service_info(self, info: Dict) -> None:
        """info: a flat dict whose values are str, int, float, bool or None; at most 64 keys and
        16 KiB once encoded."""
        for key, value in info.items():
            if not isinstance(key, str) or not (value is None or isinstance(value, (str, int, float, bool))):
                raise TypeError(f"service info {key!r}: values must be str, number, bool or None")
        payload = encode_json({"info": info})
        if len(info) > MAX_SERVICE_INFO_KEYS or len(payload) > MAX_SERVICE_INFO_PAYLOAD:
            raise ValueError(f"service info is at most {MAX_SERVICE_INFO_KEYS} keys and {MAX_SERVICE_INFO_PAYLOAD} bytes")
        self._send(UPDATE_SERVICE_INFO, payload)

    def set_broadcast_result(self, result: Dict) -> None:
        """What the broadcast produced (a file's path, its duration, its segments): every controller
        receives it with the finish and in the finished broadcast's status. A later call replaces it;
        call it from `broadcast_finished` at the latest. Any JSON-serialisable dict, nesting allowed;
        at most 64 KiB once encoded."""
        if not isinstance(result, dict) or not all(isinstance(key, str) for key in result):
            raise TypeError("the broadcast result must be a dict with str keys")
        payload = encode_json({"result": result})
        if len(payload) > MAX_RESULT_PAYLOAD:
            raise ValueError(f"the broadcast result takes {len(payload)} bytes, more than {MAX_RESULT_PAYLOAD}")
        self._send(SET_RESULT, payload)


def _log(text: str) -> None:
    print(f"{SampleHandler.client_name}: {text}", file=sys.stderr, flush=True)


def serve(handler: SampleHandler, connection: Optional[Connection] = None) -> int:
    """Runs the handler protocol until the broadcast ends; returns the exit status (0 or 1)."""
    try:
        connection = connection or Connection.from_environment()
    except (ProtocolError, OSError) as e:
        _log(str(e))
        return 1
    handler.connection = connection
    pool: Optional[FramePool] = None
    planes: List[Plane] = []
    started = False  # broadcast_started was called and broadcast_finished not yet
    reason: Optional[Dict[str, str]] = None  # why the broadcast ends here, when the connection does first
    try:
        hello_seq = connection.next_seq()
        connection.send_json(HELLO, {"client": handler.client_name, "protocol": PROTOCOL_VERSION, "role": "handler"},
                             seq=hello_seq)
        while True:
            message = connection.receive()
            op = message.opcode
            if op == VIDEO_SAMPLE:
                header = VideoHeader.decode(message.payload)
                header.planes = planes
                if pool is None or header.pool != pool.id:
                    raise ProtocolError(f"VIDEO_SAMPLE names pool {header.pool}, which was not announced")
                frame = pool.frame(header.slot, header.byte_count)
                try:
                    _callback(handler, handler.process_sample, "video", header, frame)
                finally:
                    frame.release()
                    connection.send(RELEASE_SLOT, release_slot_payload(header.pool, header.slot))
            elif op == AUDIO_SAMPLE:
                header = AudioHeader.decode(message.payload)
                data = memoryview(message.payload)[_AUDIO.size:]
                _callback(handler, handler.process_sample, header.type, header, data)
            elif op == CURSOR:
                pts, x, y, flags, width, height, hot_x, hot_y = _CURSOR.unpack_from(message.payload)
                sprite = None
                if flags & 2:
                    sprite = {"width": width, "height": height, "hotspot_x": hot_x, "hotspot_y": hot_y,
                              "argb": bytes(message.payload[_CURSOR.size:_CURSOR.size + width * height * 4])}
                _callback(handler, handler.cursor, pts, x, y, bool(flags & 1), sprite)
            elif op == WELCOME:
                welcome = message.json()
                if welcome.get("protocol") != PROTOCOL_VERSION:
                    _log(f"broadcastd speaks protocol {welcome.get('protocol')}, this handler {PROTOCOL_VERSION}")
                    return 1
            elif op == POOL:
                info = message.json()
                if len(message.fds) != 1:
                    raise ProtocolError(f"POOL carries {len(message.fds)} descriptors, expected 1")
                fd = message.fds[0]
                try:
                    if pool is not None:
                        pool.close()
                    pool = FramePool(fd, int(info["pool"]), int(info["slots"]), int(info["slotSize"]))
                finally:
                    os.close(fd)  # the mapping keeps the memory
            elif op == BROADCAST_STARTED:
                handler.broadcast = message.json()
                planes = [Plane(int(p["offset"]), int(p["stride"]), int(p["height"]))
                          for p in handler.broadcast.get("video", {}).get("planes", [])]
                started = True
                _callback(handler, handler.broadcast_started, dict(handler.broadcast.get("setupInfo") or {}))
                connection.send(READY, b"{}")
            elif op == COMMAND:
                command = message.json()
                handler.command_id = int(command["id"])
                try:
                    result = handler.handle_command(str(command["command"]), dict(command.get("arguments") or {}))
                    if result is not None:
                        handler.answer_command(handler.command_id, result)
                except Exception as e:  # the controller hears it; the broadcast goes on
                    handler.answer_command(handler.command_id, error=f"{type(e).__name__}: {e}")
            elif op == BROADCAST_PAUSED:
                _callback(handler, handler.broadcast_paused)
            elif op == BROADCAST_RESUMED:
                _callback(handler, handler.broadcast_resumed)
            elif op == VIDEO_FORMAT_CHANGED:
                video = message.json()
                handler.broadcast["video"] = video
                planes = [Plane(int(p["offset"]), int(p["stride"]), int(p["height"])) for p in video.get("planes", [])]
                _callback(handler, handler.video_format_changed, video)
            elif op == BROADCAST_FINISHED:
                end = message.json()
                error = end.get("error")
                started = False
                handler.discard = end.get("discard") is True
                handler.broadcast_finished(error)
                return 0
            elif op == ERROR:
                error = message.json()
                _log(f"broadcastd refused: {error.get('message')} ({error.get('code')})")
                reason = {"code": str(error.get("code")), "message": str(error.get("message"))}
                return 1
            else:
                for fd in message.fds:  # a message of a later version: skip it
                    _close_quietly(fd)
    except ConnectionClosed as e:
        _log(f"broadcastd closed the connection: {e}")
        reason = {"code": "shutdown", "message": GONE}
        return 1
    except (ProtocolError, KeyError, TypeError, ValueError) as e:
        _log(f"protocol error: {e!r}")
        reason = {"code": "protocol-error", "message": f"protocol error: {e}"}
        return 1
    except OSError as e:
        _log(f"connection failed: {e}")
        reason = {"code": "shutdown", "message": f"broadcastd went away ({e}) before the broadcast finished"}
        return 1
    except Exception as e:  # an exception in broadcast_finished
        _log(f"handler failed: {e!r}")
        reason = {"code": "handler-failed", "message": f"the handler failed: {e!r}"}
        return 1
    finally:
        connection.close()  # before the late broadcast_finished: its requests go nowhere
        if started:
            _finish_abruptly(handler, reason or {"code": "shutdown", "message": GONE})
        handler.connection = None
        if pool is not None:
            pool.close()


GONE = "broadcastd went away (the connection closed) before the broadcast finished"


def _finish_abruptly(handler: SampleHandler, reason: Dict[str, str]) -> None:
    """The broadcast started but BROADCAST_FINISHED will never come: the last callback comes anyway."""
    try:
        handler.broadcast_finished(reason)
    except Exception as e:
        _log(f"broadcast_finished raised {e!r}")


def _callback(handler: SampleHandler, function, *args) -> None:
    """Calls a callback; an exception in it ends the broadcast with an error instead of the process."""
    try:
        function(*args)
    except Exception as e:
        _log(f"{function.__name__} raised {e!r}")
        if not getattr(handler, "_failed_by_exception", False):
            handler._failed_by_exception = True
            handler.finish_with_error(f"{function.__name__} raised {type(e).__name__}: {e}")


def run(handler: SampleHandler) -> None:
    """Runs `handler` and exits the process: 0 after BROADCAST_FINISHED, 1 otherwise."""
    sys.exit(serve(handler))
