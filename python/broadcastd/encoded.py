"""Encoded samples (protocol revision 2.9, docs/protocol.md section 10.7): the packet ring a shared encoder writes
into, the 64-byte packet header that says where a packet lies in it, and `EncodedFollower`, the rules a handler
follows to take a shared stream: start at a keyframe, drop video after a loss until the next one, keep a time line of
its own across pauses, and ask for keyframes."""

import mmap
import os
import struct
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from .wire import ProtocolError

MAX_ENCODE_SETTINGS = 32
MAX_ENCODE_KEY_BYTES = 64
MAX_ENCODE_VALUE_BYTES = 1024
MAX_PACKET_RING = 256 << 20
MAX_ENCODED_STREAMS = 8

RING_MAGIC = b"BCPKRING"
RING_HEADER_SIZE = 64
#: `intactFrom`, in this machine's byte order (docs/protocol.md 10.7): "=" is native order, standard size.
_INTACT_FROM = struct.Struct("=Q")
INTACT_FROM_OFFSET = 16
_RING_SIZE = struct.Struct("<Q")
_PACKET = struct.Struct("<IIQQIIqqqII")  # ENCODED_PACKET: 64 bytes
_PICTURE_UNCHANGED = struct.Struct("<q")  # PICTURE_UNCHANGED: 8 bytes

KEYFRAME = 1
DISPOSABLE = 2
COPY = 4
LASTS_UNTIL_NEXT = 8
_KNOWN_FLAGS = KEYFRAME | DISPOSABLE | COPY | LASTS_UNTIL_NEXT


def encode_settings_problem(settings: Dict[str, str]) -> Optional[str]:
    """Why ENCODE's settings are beyond the protocol's bounds, or None."""
    if len(settings) > MAX_ENCODE_SETTINGS:
        return f"{len(settings)} settings, at most {MAX_ENCODE_SETTINGS}"
    for key, value in settings.items():
        if not isinstance(key, str) or not isinstance(value, str):
            return f"setting {key!r}: names and values are strings"
        if not 1 <= len(key.encode()) <= MAX_ENCODE_KEY_BYTES or len(value.encode()) > MAX_ENCODE_VALUE_BYTES:
            return (
                f"setting {key[:80]!r}: a name of 1 to {MAX_ENCODE_KEY_BYTES} bytes and a value of at most "
                f"{MAX_ENCODE_VALUE_BYTES}"
            )
    return None


@dataclass
class EncodedPacket:
    """ENCODED_PACKET's 64 bytes: where a packet of the shared encoder lies in its ring, and what it is."""

    ring: int
    stream: int  # its index in ENCODED_STREAMS's streams
    sequence: int  # from 1, every packet the encoder wrote
    offset: int
    length: int
    flags: int
    pts: int  # in the stream's timeBase, on the encoder's time line
    dts: int
    duration: int  # 0: not known
    skip_start: int = 0  # audio: samples to drop from the start of the decoded packet
    skip_end: int = 0

    @property
    def keyframe(self) -> bool:
        return bool(self.flags & KEYFRAME)

    @classmethod
    def decode(cls, payload: bytes) -> "EncodedPacket":
        if len(payload) != _PACKET.size:
            raise ProtocolError(f"ENCODED_PACKET payload is {len(payload)} bytes, expected {_PACKET.size}")
        packet = cls(*_PACKET.unpack(payload))
        if packet.flags & ~_KNOWN_FLAGS:
            raise ProtocolError(f"ENCODED_PACKET flags {packet.flags:#x}: only 1, 2, 4 and 8 are known")
        return packet

    def encode(self) -> bytes:
        return _PACKET.pack(
            self.ring,
            self.stream,
            self.sequence,
            self.offset,
            self.length,
            self.flags,
            self.pts,
            self.dts,
            self.duration,
            self.skip_start,
            self.skip_end,
        )


def picture_unchanged_through(payload: bytes) -> int:
    """PICTURE_UNCHANGED's time (ns on the encoder's time line)."""
    if len(payload) != _PICTURE_UNCHANGED.size:
        raise ProtocolError(f"PICTURE_UNCHANGED payload is {len(payload)} bytes, expected 8")
    return _PICTURE_UNCHANGED.unpack(payload)[0]


#: AUDIO_FIGURES' figures are milliseconds from 0 to this (revision 2.10).
MAX_AUDIO_FIGURE_MS = 1e12
_AUDIO_FIGURES = ("missingMs", "droppedMs", "maxClockOffsetMs")


def audio_figures(figures: Dict) -> Dict:
    """AUDIO_FIGURES' payload (revision 2.10), checked: `ring` and `stream`, and its three figures in milliseconds."""
    for key in ("ring", "stream"):
        if not isinstance(figures.get(key), int) or isinstance(figures.get(key), bool) or figures[key] < 0:
            raise ProtocolError(f"AUDIO_FIGURES needs an integer `{key}`")
    for key in _AUDIO_FIGURES:
        value = figures.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_AUDIO_FIGURE_MS:
            raise ProtocolError(f"AUDIO_FIGURES' `{key}` is a number of ms from 0 to {MAX_AUDIO_FIGURE_MS:.0f}")
    return figures


class PacketRing:
    """A shared encoder's packet ring (PACKET_RING), mapped read-only.

    `copy` takes a packet with copy-then-check: it copies the bytes, then reads `intactFrom`; the copy is whole if
    and only if `intactFrom` <= the packet's sequence number, else the encoder wrote over it (the handler fell a
    ring behind) and it is lost. In CPython a plain read after the copy is enough (docs/protocol.md 10.7: loads are
    not performed before older ones on x86-64, and on aarch64 far more instructions run between the two than a core
    holds in flight)."""

    def __init__(self, fd: int, size: int, ring: int = 0):
        if not RING_HEADER_SIZE < size <= MAX_PACKET_RING:
            raise ProtocolError(f"a packet ring of {size} bytes (more than 64 and at most {MAX_PACKET_RING} are taken)")
        if os.fstat(fd).st_size < size:
            raise ProtocolError(f"the packet ring's memory is smaller than {size} bytes")
        self.ring = ring
        self.size = size
        self._map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        if self._map[:8] != RING_MAGIC or _RING_SIZE.unpack_from(self._map, 8)[0] != size:
            self._map.close()
            raise ProtocolError(f"the memory is not a packet ring of {size} bytes")

    @property
    def intact_from(self) -> int:
        """The oldest sequence number whose bytes are still whole in the ring."""
        return _INTACT_FROM.unpack_from(self._map, INTACT_FROM_OFFSET)[0]

    def copy(self, packet: EncodedPacket) -> Optional[bytes]:
        """The packet's bytes, or None when the encoder wrote over them before (or while) they were copied."""
        if packet.offset < RING_HEADER_SIZE or packet.offset + packet.length > self.size:
            raise ProtocolError(f"{packet.length} bytes at {packet.offset} lie outside the {self.size}-byte ring")
        if packet.sequence < self.intact_from:
            return None
        data = self._map[packet.offset : packet.offset + packet.length]
        return data if packet.sequence >= self.intact_from else None

    def close(self) -> None:
        self._map.close()


def rescale(value: int, from_base: Tuple[int, int], to_base: Tuple[int, int]) -> int:
    """`value` in `from_base` (numerator, denominator seconds) in `to_base`, rounded to the nearest (as libavutil's
    av_rescale does: there and back again gives the value back)."""
    divisor = from_base[1] * to_base[0]
    return (2 * value * from_base[0] * to_base[1] + divisor) // (2 * divisor)


NANOSECONDS = (1, 1_000_000_000)


class EncodedFollower:
    """One handler's way through a shared stream (docs/protocol.md 10.7), as `take` sees each packet: it starts at a
    keyframe of the video stream, asking for one; after a lost video packet it drops video until the next keyframe,
    asking for one, and the sound goes on; after a pause it asks for a keyframe and goes on from it where its own
    time line stopped, with no gap. `take` answers the packet's times on that time line, or None to drop it."""

    def __init__(self, streams: List[Dict], request_keyframe: Callable[[], None]):
        self.streams = streams
        self.time_bases = [(int(s["timeBase"][0]), int(s["timeBase"][1])) for s in streams]
        video = [i for i, s in enumerate(streams) if s.get("kind") == "video"]
        if not video:
            raise ProtocolError("the shared encoder has no video stream")
        self.video = video[0]
        rate = streams[self.video].get("frameRate") or [30, 1]
        self.frame_interval = 1_000_000_000 * int(rate[1]) // max(1, int(rate[0]))
        self._request_keyframe = request_keyframe
        self.waiting = True  # for a keyframe
        self.resuming = True  # that keyframe starts a stretch: the time line is shifted to it
        self.paused = False
        self.begun = False
        self.shift = 0  # encoder time minus own time, ns
        self.resume_at = 0  # own time where the next stretch begins, ns
        self.picture_end = 0  # own time where the picture written so far ends, ns
        self.last_sequence: Optional[int] = None
        self.lost = 0
        self.keyframes_asked = 0
        self.ask()

    def ask(self) -> None:
        self.keyframes_asked += 1
        self._request_keyframe()

    def take(self, packet: EncodedPacket, data: Optional[bytes]) -> Optional[Tuple[int, int]]:
        """The packet's (pts, dts) on the handler's own time line in its stream's time base, or None: drop it.
        `data` None: it was lost in the ring."""
        if not 0 <= packet.stream < len(self.streams):
            raise ProtocolError(f"a packet of stream {packet.stream}, which ENCODED_STREAMS did not have")
        # Packets broadcastd did not tell (it dropped them: this handler's queue was full) are lost as well.
        gap = packet.sequence - self.last_sequence - 1 if self.last_sequence is not None else 0
        self.last_sequence = max(packet.sequence, self.last_sequence or 0)
        if self.paused:
            return None
        video = packet.stream == self.video
        base = self.time_bases[packet.stream]
        time = rescale(packet.pts, base, NANOSECONDS)
        if data is None or gap > 0:
            self.lost += max(gap, 0) + (data is None)
            if not self.waiting and (video or gap > 0):
                self.waiting, self.resuming = True, False
                self.ask()
            if data is None:
                return None
        if self.waiting:
            if video and not packet.keyframe:
                self.lost += not self.resuming and self.begun  # the rest of a GOP after a loss
                return None
            if not video and (self.resuming or not self.begun):
                return None
            if video:
                if self.resuming or not self.begun:
                    self.shift = time - self.resume_at
                self.waiting, self.begun = False, True
        elif not video and time - self.shift < self.resume_at:
            return None
        if video:
            self.picture_end = max(self.picture_end, time - self.shift + self.frame_interval)
        shift = rescale(self.shift, NANOSECONDS, base)
        return packet.pts - shift, packet.dts - shift

    def own_time(self, encoder_time: int) -> int:
        """An encoder time (ns) on the handler's own time line."""
        return encoder_time - self.shift

    def pause(self) -> None:
        if self.begun and not self.paused:
            self.resume_at = self.picture_end
        self.paused = True

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused, self.waiting, self.resuming = False, True, True
        self.ask()
