"""Sample handlers: subclass `SampleHandler`, then call `run(handler)` (docs/writing-a-handler.md).

    import broadcastd

    class MyHandler(broadcastd.SampleHandler):
        def broadcast_started(self, setup_info):
            ...
        def process_sample(self, kind, header, data):
            ...   # kind: "video", "audioApp" or "audioMic"; data: a memoryview

    broadcastd.run(MyHandler())

`run` connects over the socket broadcastd passed in fd 3 (BROADCASTD_HANDLER_FD), says HELLO,
maps the frame pool, calls the callbacks, sends READY after `broadcast_started` returns and
RELEASE_SLOT after every video callback, and exits: 0 after BROADCAST_FINISHED, 1 when the daemon
closes the connection or sends ERROR. A broadcast that started always gets its
`broadcast_finished`: when the connection ends first (broadcastd was killed), it comes with that
reason as the error, so that a handler can still close what it wrote.

Rules from ReplayKit that still hold: return from callbacks quickly, and do not keep `data` past
`process_sample` (video data lives in a shared pool slot that broadcastd reuses once released).

Revision 2.9: a handler may take its samples encoded instead, by an encoder it shares with the handlers that ask for
the same settings: `request_encoding(settings)`, then `encoding_answered`, `encoded_streams`, `encoded_packet` (the
packet's bytes copied out of the ring, or None when it was lost) and `picture_unchanged`; `EncodedFollower` keeps the
rules of docs/protocol.md section 10.7 (examples/python/encoded.py).
"""

import os
import sys
from typing import Dict, List, Optional

from .encoded import (
    MAX_ENCODED_STREAMS,
    EncodedPacket,
    audio_figures,
    PacketRing,
    encode_settings_problem,
    picture_unchanged_through,
)
from .wire import (
    AUDIO_FIGURES,
    AUDIO_SAMPLE,
    BROADCAST_FINISHED,
    BROADCAST_PAUSED,
    BROADCAST_RESUMED,
    BROADCAST_STARTED,
    CAMERA_FORMAT,
    CAMERA_SAMPLE,
    COMMAND,
    COMMAND_ANSWER,
    CURSOR,
    ENCODE,
    ENCODED_PACKET,
    ENCODED_STREAMS,
    ENCODING,
    ERROR,
    FINISH_WITH_ERROR,
    HELLO,
    KEYFRAME_REQUESTED,
    MAX_COMMAND_ANSWER_PAYLOAD,
    MAX_RESULT_PAYLOAD,
    MAX_SERVICE_INFO_KEYS,
    MAX_SERVICE_INFO_PAYLOAD,
    MAX_URL_BYTES,
    PACKET_RING,
    PICTURE_UNCHANGED,
    POOL,
    PROTOCOL_VERSION,
    READY,
    RELEASE_SLOT,
    REQUEST_KEYFRAME,
    SET_RESULT,
    UPDATE_SERVICE_INFO,
    UPDATE_URL,
    VIDEO_FORMAT_CHANGED,
    VIDEO_SAMPLE,
    WELCOME,
    Announcements,
    AudioHeader,
    Connection,
    ConnectionClosed,
    FramePool,
    Plane,
    ProtocolError,
    VideoHeader,
    _AUDIO,
    _CURSOR,
    _close_quietly,
    encode_json,
    release_slot_payload,
)


class SampleHandler(Announcements):
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
        #: WELCOME as received: server, protocol and (revision 2.6) revision and features.
        self.welcome: Dict = {}
        #: Revision 2.9: the shared encoder's packet ring, once PACKET_RING mapped it.
        self.packet_ring: Optional[PacketRing] = None
        self._ready = False  # READY was sent: ENCODE goes after it
        self._pending_encode: Optional[bytes] = None
        self._awaiting_encoding = False  # ENCODE asked for and not answered

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

    # Protocol revision 2.8: the camera, for a handler whose manifest says "camera": true (or whose setup field
    # `camera` is "on") when the broadcast has one. Its frames come to `process_sample` as "videoCamera".

    def camera_changed(self, camera: str, video: Optional[Dict], lost: Optional[str]) -> None:
        """`video` (a video description): the camera's frames' format from now on; or `lost` (video None):
        why no more camera frames come. The broadcast goes on either way."""

    # Protocol revision 2.9: encoded samples (docs/protocol.md section 10.7), after `request_encoding`.

    def encoding_answered(self, encoder: Optional[int], shared_with: List[int], error: Optional[str]) -> None:
        """`encoder`: the shared encoder this handler takes its samples from (no more `process_sample`; its streams
        and packets follow); or `error` (encoder None): why there is none, and samples keep coming."""

    def encoded_streams(self, streams: List[Dict]) -> None:
        """The shared encoder's streams (docs/protocol.md 9.11), once, before its first packet; `packet_ring` is
        mapped. Ask for a keyframe (`request_keyframe`) and start at one: `EncodedFollower` does both."""

    def encoded_packet(self, packet: EncodedPacket, data: Optional[bytes]) -> None:
        """One packet of the shared encoder: its header, and its bytes copied out of the ring and checked, or None
        when the encoder wrote over them first (this handler fell a ring behind): drop the video until its next
        keyframe and ask for one (`EncodedFollower.take` does)."""

    def picture_unchanged(self, through: int) -> None:
        """The shared encoder's picture stood still through `through` (its time, ns): the last frame lasts."""

    def audio_figures(self, figures: Dict) -> None:
        """Revision 2.10: how one audio stream of the shared encoder fared through its last packet (AUDIO_FIGURES:
        `stream`; `missingMs` and `droppedMs`, its totals so far; `maxClockOffsetMs`, the largest since its last)."""

    def keyframe_requested(self) -> None:
        """For broadcastd's encoder only: a handler it serves asked for a keyframe."""

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
            payload = encode_json(
                {"id": command_id, "error": {"message": f"the result was too large ({len(payload)} bytes)"}}
            )
        self._send(COMMAND_ANSWER, payload)

    # Requests to the daemon

    def _send(self, opcode: int, payload: bytes) -> None:
        if self.connection is None:
            raise RuntimeError("not connected to broadcastd (call run(handler))")
        if not self.connection.closed:  # else broadcastd went away: nobody is left to tell
            self.connection.send(opcode, payload)

    def request_encoding(self, settings: Dict[str, str]) -> None:
        """Revision 2.9: asks to share an encoder of these settings (the `record` handler's encoding settings by
        name, e.g. {"codec": "h264"}) instead of taking samples; `encoding_answered` follows. Call it once, from
        `broadcast_started` or later (ENCODE goes out right after READY). Check `offers("encoded-samples")` first:
        an older daemon answers with an `unsupported` ERROR, and samples keep coming."""
        problem = encode_settings_problem(settings)
        if problem is not None:
            raise ValueError(f"ENCODE: {problem}")
        payload = encode_json({"settings": dict(settings)})
        self._awaiting_encoding = True
        if self._ready:
            self._send(ENCODE, payload)
        else:
            self._pending_encode = payload

    def request_keyframe(self) -> None:
        """Revision 2.9: asks the shared encoder for a keyframe (the handler joined, resumed or lost packets)."""
        self._send(REQUEST_KEYFRAME, b"{}")

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
            raise ValueError(
                f"service info is at most {MAX_SERVICE_INFO_KEYS} keys and {MAX_SERVICE_INFO_PAYLOAD} bytes"
            )
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
    camera_pool: Optional[FramePool] = None  # revision 2.8: the camera's, beside the screen's
    camera_planes: List[Plane] = []
    started = False  # broadcast_started was called and broadcast_finished not yet
    reason: Optional[Dict[str, str]] = None  # why the broadcast ends here, when the connection does first
    try:
        hello_seq = connection.next_seq()
        connection.send_json(
            HELLO, {"client": handler.client_name, "protocol": PROTOCOL_VERSION, "role": "handler"}, seq=hello_seq
        )
        while True:
            message = connection.receive()
            op = message.opcode
            if op in (VIDEO_SAMPLE, CAMERA_SAMPLE):
                camera = op == CAMERA_SAMPLE  # revision 2.8: the camera's frame, in the camera's pool
                header = VideoHeader.decode(message.payload)
                header.planes = camera_planes if camera else planes
                frames = camera_pool if camera else pool
                if frames is None or header.pool != frames.id:
                    name = "CAMERA_SAMPLE" if camera else "VIDEO_SAMPLE"
                    raise ProtocolError(f"{name} names pool {header.pool}, which was not announced")
                frame = frames.frame(header.slot, header.byte_count)
                try:
                    _callback(handler, handler.process_sample, "videoCamera" if camera else "video", header, frame)
                finally:
                    frame.release()
                    connection.send(RELEASE_SLOT, release_slot_payload(header.pool, header.slot))
            elif op == CAMERA_FORMAT:
                notice = message.json()
                video = notice.get("video")
                camera_planes = [
                    Plane(int(p["offset"]), int(p["stride"]), int(p["height"])) for p in (video or {}).get("planes", [])
                ]
                _callback(handler, handler.camera_changed, str(notice.get("camera", "")), video, notice.get("lost"))
            elif op == AUDIO_SAMPLE:
                header = AudioHeader.decode(message.payload)
                data = memoryview(message.payload)[_AUDIO.size :]
                _callback(handler, handler.process_sample, header.type, header, data)
            elif op == ENCODED_PACKET:
                packet = EncodedPacket.decode(message.payload)
                if handler.packet_ring is None:
                    raise ProtocolError("ENCODED_PACKET before PACKET_RING")
                _callback(handler, handler.encoded_packet, packet, handler.packet_ring.copy(packet))
            elif op == PICTURE_UNCHANGED:
                _callback(handler, handler.picture_unchanged, picture_unchanged_through(message.payload))
            elif op == AUDIO_FIGURES:
                _callback(handler, handler.audio_figures, audio_figures(message.json()))
            elif op in (ENCODING, PACKET_RING, ENCODED_STREAMS, KEYFRAME_REQUESTED):
                _take_encoding_message(handler, message)
            elif op == CURSOR:
                pts, x, y, flags, width, height, hot_x, hot_y = _CURSOR.unpack_from(message.payload)
                sprite = None
                if flags & 2:
                    sprite = {
                        "width": width,
                        "height": height,
                        "hotspot_x": hot_x,
                        "hotspot_y": hot_y,
                        "argb": bytes(message.payload[_CURSOR.size : _CURSOR.size + width * height * 4]),
                    }
                _callback(handler, handler.cursor, pts, x, y, bool(flags & 1), sprite)
            elif op == WELCOME:
                welcome = message.json()
                if welcome.get("protocol") != PROTOCOL_VERSION:
                    _log(f"broadcastd speaks protocol {welcome.get('protocol')}, this handler {PROTOCOL_VERSION}")
                    return 1
                handler.welcome = welcome
            elif op == POOL:
                info = message.json()
                if len(message.fds) != 1:
                    raise ProtocolError(f"POOL carries {len(message.fds)} descriptors, expected 1")
                fd = message.fds[0]
                try:
                    mapped = FramePool(fd, int(info["pool"]), int(info["slots"]), int(info["slotSize"]))
                    if info.get("camera") is True:
                        if camera_pool is not None:
                            camera_pool.close()
                        camera_pool = mapped
                    else:
                        if pool is not None:
                            pool.close()
                        pool = mapped
                finally:
                    os.close(fd)  # the mapping keeps the memory
            elif op == BROADCAST_STARTED:
                handler.broadcast = message.json()
                planes = [
                    Plane(int(p["offset"]), int(p["stride"]), int(p["height"]))
                    for p in handler.broadcast.get("video", {}).get("planes", [])
                ]
                started = True
                _callback(handler, handler.broadcast_started, dict(handler.broadcast.get("setupInfo") or {}))
                connection.send(READY, b"{}")
                handler._ready = True
                if handler._pending_encode is not None:  # revision 2.9: asked for in broadcast_started
                    connection.send(ENCODE, handler._pending_encode)
                    handler._pending_encode = None
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
            elif op == ERROR and message.json().get("code") == "unsupported":
                _log(
                    f"broadcastd: {message.json().get('message')}"
                )  # a message of a later revision: the connection stays
                if handler._awaiting_encoding:  # ENCODE to a daemon older than 2.9: no shared encoder
                    handler._awaiting_encoding = False
                    _callback(handler, handler.encoding_answered, None, [], str(message.json().get("message")))
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
        for frames in (pool, camera_pool, handler.packet_ring):
            if frames is not None:
                frames.close()
        handler.packet_ring = None


GONE = "broadcastd went away (the connection closed) before the broadcast finished"


def _take_encoding_message(handler: SampleHandler, message) -> None:
    """Revision 2.9's messages other than packets: ENCODING, PACKET_RING, ENCODED_STREAMS, KEYFRAME_REQUESTED."""
    op = message.opcode
    if op == PACKET_RING:
        if len(message.fds) != 1:
            raise ProtocolError(f"PACKET_RING carries {len(message.fds)} descriptors, expected 1")
        try:
            announcement = message.json()
            ring = PacketRing(message.fds[0], int(announcement["size"]), int(announcement["ring"]))
        finally:
            os.close(message.fds[0])  # the mapping keeps the memory
        if handler.packet_ring is not None:
            handler.packet_ring.close()
        handler.packet_ring = ring
    elif op == ENCODED_STREAMS:
        streams = message.json().get("streams")
        if not isinstance(streams, list) or not 1 <= len(streams) <= MAX_ENCODED_STREAMS:
            raise ProtocolError(f"ENCODED_STREAMS holds 1 to {MAX_ENCODED_STREAMS} streams")
        if handler.packet_ring is None:
            raise ProtocolError("ENCODED_STREAMS before PACKET_RING")
        _callback(handler, handler.encoded_streams, streams)
    elif op == ENCODING:
        handler._awaiting_encoding = False
        notice = message.json()
        encoder = notice.get("encoder")
        shared = [int(b) for b in notice.get("sharedWith") or []]
        error = notice.get("error")
        _callback(handler, handler.encoding_answered, None if encoder is None else int(encoder), shared, error)
    else:
        _callback(handler, handler.keyframe_requested)


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
