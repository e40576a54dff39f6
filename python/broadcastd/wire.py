"""The wire: framing, descriptor passing, the binary sample structures and the frame pool (docs/protocol.md
sections 3, 4, 10; the opcodes and layouts are checked against protocol.json by the package's tests)."""

import array
import json
import mmap
import os
import select
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Set, Tuple

PROTOCOL_VERSION = 2
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
LIST_HANDLERS = 0x0100
HANDLERS = 0x0101
START = 0x0102
PAUSE = 0x0103
RESUME = 0x0104
FINISH = 0x0105
GET_STATUS = 0x0106
STATUS = 0x0107
SUBSCRIBE = 0x0108
LIST_SOURCES = 0x0109
SOURCES = 0x010A
GET_SNAPSHOT = 0x010B
SNAPSHOT = 0x010C
SEND_COMMAND = 0x010D  # revision 2.3
COMMAND_RESULT = 0x010E  # revision 2.3
CHANGE_CAPTURE = 0x010F  # revision 2.1
STATE_CHANGED = 0x0180
SERVICE_INFO = 0x0181
URL_UPDATED = 0x0182
FINISHED = 0x0183
GET_SETUP_REQUEST = 0x0200
SETUP_REQUEST = 0x0201
COMPLETE_SETUP = 0x0202
CANCEL_SETUP = 0x0203
POOL = 0x0300
BROADCAST_STARTED = 0x0301
BROADCAST_PAUSED = 0x0302
BROADCAST_RESUMED = 0x0303
BROADCAST_FINISHED = 0x0304
VIDEO_FORMAT_CHANGED = 0x0305
COMMAND = 0x0306  # revision 2.3
CAMERA_FORMAT = 0x0307  # revision 2.8
PACKET_RING = 0x0308  # revision 2.9 (encoded samples)
ENCODED_STREAMS = 0x0309  # revision 2.9
ENCODING = 0x030A  # revision 2.9
KEYFRAME_REQUESTED = 0x030B  # revision 2.9, to broadcastd's encoder
VIDEO_SAMPLE = 0x0310
AUDIO_SAMPLE = 0x0311
CURSOR = 0x0312
CAMERA_SAMPLE = 0x0313  # revision 2.8
ENCODED_PACKET = 0x0314  # revision 2.9
PICTURE_UNCHANGED = 0x0315  # revision 2.9
AUDIO_FIGURES = 0x0316  # revision 2.10
READY = 0x0380
RELEASE_SLOT = 0x0381
FINISH_WITH_ERROR = 0x0382
UPDATE_URL = 0x0383
UPDATE_SERVICE_INFO = 0x0384
SET_RESULT = 0x0385
COMMAND_ANSWER = 0x0386  # revision 2.3
ENCODE = 0x0387  # revision 2.9
REQUEST_KEYFRAME = 0x0388  # revision 2.9
SHARE_RING = 0x0389  # revision 2.9, from broadcastd's encoder
SHARE_STREAMS = 0x038A  # revision 2.9, from broadcastd's encoder
SHARE_PACKET = 0x038B  # revision 2.9, from broadcastd's encoder
SHARE_PICTURE_UNCHANGED = 0x038C  # revision 2.9, from broadcastd's encoder
SHARE_AUDIO_FIGURES = 0x038D  # revision 2.10, from broadcastd's encoder

#: Every opcode by name, and every name by opcode.
OPCODES = {
    name: globals()[name]
    for name in (
        "HELLO",
        "WELCOME",
        "OK",
        "ERROR",
        "LIST_HANDLERS",
        "HANDLERS",
        "START",
        "PAUSE",
        "RESUME",
        "FINISH",
        "GET_STATUS",
        "STATUS",
        "SUBSCRIBE",
        "LIST_SOURCES",
        "SOURCES",
        "GET_SNAPSHOT",
        "SNAPSHOT",
        "SEND_COMMAND",
        "COMMAND_RESULT",
        "CHANGE_CAPTURE",
        "STATE_CHANGED",
        "SERVICE_INFO",
        "URL_UPDATED",
        "FINISHED",
        "GET_SETUP_REQUEST",
        "SETUP_REQUEST",
        "COMPLETE_SETUP",
        "CANCEL_SETUP",
        "POOL",
        "BROADCAST_STARTED",
        "BROADCAST_PAUSED",
        "BROADCAST_RESUMED",
        "BROADCAST_FINISHED",
        "VIDEO_FORMAT_CHANGED",
        "COMMAND",
        "CAMERA_FORMAT",
        "PACKET_RING",
        "ENCODED_STREAMS",
        "ENCODING",
        "KEYFRAME_REQUESTED",
        "VIDEO_SAMPLE",
        "AUDIO_SAMPLE",
        "CURSOR",
        "CAMERA_SAMPLE",
        "ENCODED_PACKET",
        "PICTURE_UNCHANGED",
        "AUDIO_FIGURES",
        "READY",
        "RELEASE_SLOT",
        "FINISH_WITH_ERROR",
        "UPDATE_URL",
        "UPDATE_SERVICE_INFO",
        "SET_RESULT",
        "COMMAND_ANSWER",
        "ENCODE",
        "REQUEST_KEYFRAME",
        "SHARE_RING",
        "SHARE_STREAMS",
        "SHARE_PACKET",
        "SHARE_PICTURE_UNCHANGED",
        "SHARE_AUDIO_FIGURES",
    )
}
OPCODE_NAMES = {value: name for name, value in OPCODES.items()}

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


class Announcements:
    """What the daemon's WELCOME announced; `welcome` is its payload as received."""

    welcome: Dict = {}

    @property
    def revision(self) -> Optional[str]:
        """The daemon's protocol revision ("2.6"); None from a daemon older than 2.6, which does not say."""
        return self.welcome.get("revision")

    @property
    def features(self) -> Optional[Set[str]]:
        """The features the daemon offers (docs/protocol.md section 7); None from a daemon older than 2.6."""
        features = self.welcome.get("features")
        return set(features) if isinstance(features, list) else None

    def offers(self, feature: str) -> Optional[bool]:
        """Whether the daemon offers `feature`; None when it announced none (older than 2.6: only trying tells)."""
        features = self.features
        return None if features is None else feature in features


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
        payload = bytes(self._buffer[HEADER_SIZE : HEADER_SIZE + size])
        del self._buffer[: HEADER_SIZE + size]
        fds = [self._fds.popleft() for _ in range(fd_count)]
        return Message(opcode, seq, payload, fds)

    def receive(self, timeout: Optional[float] = None) -> Optional[Message]:
        """The next whole message; blocks, or waits at most `timeout` seconds (then None). Raises ConnectionClosed at
        end of stream."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            message = self._take()
            if message is not None:
                return message
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    return None
            self._fill()

    def fill_once(self) -> List[Message]:
        """Reads what one receive call gives (the socket must be readable); the whole messages it completes."""
        self._fill()
        messages = []
        while True:
            message = self._take()
            if message is None:
                return messages
            messages.append(message)

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
        (
            pts,
            duration,
            sequence,
            flags,
            degrees,
            mirrored,
            _reserved,
            pool,
            slot,
            width,
            height,
            fourcc,
            byte_count,
        ) = _VIDEO.unpack(payload)
        if degrees not in (0, 90, 180, 270):
            raise ProtocolError(f"VIDEO_SAMPLE orientation {degrees} is not 0, 90, 180 or 270")
        return cls(
            pts,
            duration,
            sequence,
            bool(flags & DISCONTINUITY),
            degrees,
            mirrored != 0,
            pool,
            slot,
            width,
            height,
            fourcc,
            byte_count,
            repeated=bool(flags & REPEATED),
        )


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
        pts, duration, sequence, flags, kind, fmt, channels, _reserved, rate, frames = _AUDIO.unpack_from(payload, 0)
        if kind not in (2, 3):
            raise ProtocolError(f"AUDIO_SAMPLE type {kind} is not 2 or 3")
        if fmt not in AUDIO_FORMATS:
            raise ProtocolError(f"AUDIO_SAMPLE format {fmt} is not 1 or 2")
        name, width = AUDIO_FORMATS[fmt]
        if len(payload) != _AUDIO.size + frames * channels * width:
            raise ProtocolError(f"AUDIO_SAMPLE of {frames} frames has {len(payload) - _AUDIO.size} bytes of PCM")
        return cls(
            pts, duration, sequence, bool(flags & DISCONTINUITY), SAMPLE_TYPES[kind], name, channels, rate, frames
        )


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
        return self._view[start : start + byte_count]

    def close(self) -> None:
        try:
            self._view.release()
            self._map.close()
        except BufferError:
            pass  # someone kept a frame view; the mapping goes with the process
