"""Revision 2.9, encoded samples: the packet ring read from a memfd the test writes, the packet header against
protocol.json, the rules of EncodedFollower, and a handler (the SDK and examples/python/encoded.py) served by a daemon
of a few lines."""

import base64
import importlib.util
import json
import mmap
import os
import socket
import struct
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import broadcastd  # noqa: E402
from broadcastd import encoded, wire  # noqa: E402
from broadcastd.encoded import EncodedFollower, EncodedPacket, PacketRing  # noqa: E402

RING_SIZE = 64 + 4096


class Ring:
    """A packet ring as an encoder writes it (docs/protocol.md 10.7): a memfd mapped writable, the header, packets
    placed where the test says, `intactFrom` raised before bytes are written over."""

    def __init__(self, size=RING_SIZE):
        self.fd = os.memfd_create("test-ring")
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        self.map[0:8] = b"BCPKRING"
        struct.pack_into("<Q", self.map, 8, size)
        self.set_intact_from(1)
        self.size = size

    def set_intact_from(self, sequence):
        struct.pack_into("=Q", self.map, 16, sequence)

    def put(self, sequence, offset, data, stream=0, flags=0, pts=0):
        self.map[offset : offset + len(data)] = data
        return EncodedPacket(7, stream, sequence, offset, len(data), flags, pts, pts, 0)

    def reader(self):
        return PacketRing(self.fd, self.size, ring=7)

    def close(self):
        self.map.close()
        os.close(self.fd)


class PacketRingTests(unittest.TestCase):
    def setUp(self):
        self.ring = Ring()
        self.addCleanup(self.ring.close)

    def test_a_whole_packet_is_copied_out_of_the_ring(self):
        packet = self.ring.put(1, 64, b"\x00\x00\x00\x01\x65" + b"a" * 100, flags=encoded.KEYFRAME)
        reader = self.ring.reader()
        data = reader.copy(packet)
        self.assertEqual(data, b"\x00\x00\x00\x01\x65" + b"a" * 100)
        self.assertIsInstance(data, bytes)  # a copy: the ring may change under a view
        self.ring.map[64:69] = b"XXXXX"
        self.assertEqual(data[:5], b"\x00\x00\x00\x01\x65")
        reader.close()

    def test_a_packet_written_over_before_the_copy_is_lost(self):
        first = self.ring.put(1, 64, b"1" * 200)
        self.ring.set_intact_from(2)  # the writer wraps onto it
        self.ring.put(2, 64, b"2" * 200)
        reader = self.ring.reader()
        self.assertIsNone(reader.copy(first))
        self.assertEqual(reader.intact_from, 2)
        reader.close()

    def test_a_copy_torn_by_the_writer_is_thrown_away(self):
        """The writer laps the reader between its first look at intactFrom and its copy: the bytes copied are the
        new packet's, and only the check after the copy can tell."""
        old = self.ring.put(1, 64, b"o" * 300)
        ring = self.ring

        class Racing(PacketRing):
            looks = 0

            @property
            def intact_from(self):
                value = super().intact_from
                Racing.looks += 1
                if Racing.looks == 1:  # after this look, before the copy: the writer raises, then writes over
                    ring.set_intact_from(2)
                    ring.put(2, 64, b"n" * 300)
                return value

        reader = Racing(self.ring.fd, self.ring.size)
        self.assertEqual(reader.copy(old), None)
        self.assertEqual(Racing.looks, 2, "intactFrom is read before and after the copy")
        self.assertEqual(bytes(self.ring.map[64:70]), b"nnnnnn", "the bytes a copy would have had were not the packet's")
        reader.close()

    def test_a_packet_outside_the_ring_or_a_ring_that_is_not_one_is_refused(self):
        reader = self.ring.reader()
        for offset, length in ((32, 8), (RING_SIZE - 4, 8), (2**63, 8)):
            with self.assertRaises(wire.ProtocolError):
                reader.copy(EncodedPacket(7, 0, 1, offset, length, 0, 0, 0, 0))
        reader.close()
        with self.assertRaises(wire.ProtocolError):
            PacketRing(self.ring.fd, RING_SIZE * 2)  # larger than the memory
        self.ring.map[0:1] = b"X"
        with self.assertRaises(wire.ProtocolError):
            PacketRing(self.ring.fd, RING_SIZE)
        with self.assertRaises(wire.ProtocolError):
            PacketRing(self.ring.fd, 64)


class HeaderTests(unittest.TestCase):
    def test_the_packet_header_is_the_descriptions(self):
        description = broadcastd.description()
        layout = description["layouts"]["encodedPacket"]
        self.assertEqual(layout["size"], 64)
        values = dict(
            ring=0x01020304,
            stream=0x11121314,
            sequence=0x2122232425262728,
            offset=0x3132333435363738,
            length=0x41424344,
            flags=13,
            pts=-2,
            dts=0x5152535455565758,
            duration=0x6162636465666768,
            skipStart=0x71727374,
            skipEnd=0x0A0B0C0D,
        )
        packed = encoded._PACKET.pack(*values.values())
        self.assertEqual(len(packed), layout["size"])
        for field in layout["fields"]:
            signed = field["type"].startswith("i")
            got = int.from_bytes(packed[field["offset"] : field["offset"] + field["size"]], "little", signed=signed)
            self.assertEqual(got, values[field["name"]], field["name"])
        packet = EncodedPacket.decode(packed)
        self.assertEqual((packet.pts, packet.skip_end, packet.keyframe), (-2, 0x0A0B0C0D, True))
        self.assertEqual(packet.encode(), packed)
        with self.assertRaises(wire.ProtocolError):
            EncodedPacket.decode(packed[:-1])
        with self.assertRaises(wire.ProtocolError):
            EncodedPacket.decode(packed[:28] + struct.pack("<I", 16) + packed[32:])  # a flag of a later revision
        ring = description["layouts"]["packetRingHeader"]
        offsets = {f["name"]: f["offset"] for f in ring["fields"]}
        self.assertEqual((offsets["intactFrom"], ring["size"]), (encoded.INTACT_FROM_OFFSET, encoded.RING_HEADER_SIZE))

    def test_the_encode_bounds_are_the_descriptions(self):
        message = next(m for m in broadcastd.description()["messages"] if m["name"] == "ENCODE")
        settings = message["payload"]["fields"][0]
        self.assertEqual(
            (settings["maxItems"], settings["maxKeyBytes"], settings["maxValueBytes"]),
            (encoded.MAX_ENCODE_SETTINGS, encoded.MAX_ENCODE_KEY_BYTES, encoded.MAX_ENCODE_VALUE_BYTES),
        )
        self.assertIsNone(encoded.encode_settings_problem({"k" * 64: "v" * 1024}))
        self.assertIsNotNone(encoded.encode_settings_problem({"k" * 65: "v"}))
        self.assertIsNotNone(encoded.encode_settings_problem({"k": "v" * 1025}))
        self.assertIsNotNone(encoded.encode_settings_problem({"": "v"}))
        self.assertIsNotNone(encoded.encode_settings_problem({f"k{i}": "v" for i in range(33)}))

    def test_the_audio_figures_bounds_are_the_descriptions(self):
        message = next(m for m in broadcastd.description()["messages"] if m["name"] == "AUDIO_FIGURES")
        for field in message["payload"]["fields"][2:]:
            self.assertEqual((field["min"], field["max"]), (0, encoded.MAX_AUDIO_FIGURE_MS), field["name"])
        figures = {"ring": 4, "stream": 1, "missingMs": 20, "droppedMs": 0, "maxClockOffsetMs": 1e12}
        self.assertEqual(encoded.audio_figures(dict(figures)), figures)
        for key, wrong in [("missingMs", -0.1), ("droppedMs", 1.1e12), ("maxClockOffsetMs", None), ("stream", "1")]:
            with self.assertRaises(broadcastd.ProtocolError, msg=key):
                encoded.audio_figures(dict(figures, **{key: wrong}))


VIDEO = {"stream": 0, "kind": "video", "codec": "h264", "timeBase": [1, 90000], "frameRate": [30, 1]}
AUDIO = {"stream": 1, "kind": "audio", "codec": "opus", "timeBase": [1, 48000]}


def packet(sequence, stream, pts, keyframe=False):
    return EncodedPacket(7, stream, sequence, 64, 1, encoded.KEYFRAME if keyframe else 0, pts, pts, 0)


class FollowerTests(unittest.TestCase):
    def setUp(self):
        self.asked = 0
        self.follower = EncodedFollower([VIDEO, AUDIO], self.ask)

    def ask(self):
        self.asked += 1

    def take(self, sequence, stream, pts, keyframe=False, data=b"x"):
        return self.follower.take(packet(sequence, stream, pts, keyframe), data)

    def test_a_join_asks_for_a_keyframe_and_starts_at_it_at_time_0(self):
        self.assertEqual(self.asked, 1)
        self.assertIsNone(self.take(10, 0, 900_000))  # a frame of a running encoder, 10 s in
        self.assertIsNone(self.take(11, 1, 480_000))  # audio before the keyframe
        self.assertEqual(self.take(12, 0, 903_000, keyframe=True), (0, 0))
        self.assertEqual(self.take(13, 1, 483_200), (1600, 1600))  # audio 1/30 s later, in 1/48000 s
        self.assertEqual(self.take(14, 0, 906_000), (3000, 3000))
        self.assertEqual((self.follower.lost, self.asked), (0, 1))

    def test_a_loss_drops_the_video_until_the_next_keyframe_and_the_time_goes_on(self):
        self.take(1, 0, 0, keyframe=True)
        self.assertIsNone(self.take(2, 0, 3000, data=None))  # written over in the ring
        self.assertEqual(self.asked, 2)
        self.assertIsNone(self.take(3, 0, 6000))  # refers to what was lost
        self.assertEqual(self.take(4, 1, 9600), (9600, 9600), "the sound goes on")
        self.assertEqual(self.take(5, 0, 9000, keyframe=True), (9000, 9000), "no shift: the loss is a gap")
        self.assertEqual((self.follower.lost, self.asked), (2, 2))

    def test_packets_broadcastd_dropped_are_a_loss_too(self):
        self.take(1, 0, 0, keyframe=True)
        self.assertIsNone(self.take(5, 0, 12000))  # 2, 3 and 4 never came
        self.assertEqual((self.follower.lost, self.asked), (4, 2))
        self.assertEqual(self.take(6, 0, 15000, keyframe=True), (15000, 15000))

    def test_a_pause_leaves_no_gap(self):
        self.take(1, 0, 0, keyframe=True)
        self.take(2, 0, 3000)
        self.follower.pause()
        self.assertIsNone(self.take(3, 0, 6000, keyframe=True), "nothing while paused")
        self.follower.resume()
        self.assertEqual(self.asked, 2)
        self.assertIsNone(self.take(4, 0, 90_000))
        self.assertIsNone(self.take(5, 1, 48_000), "sound before the keyframe")
        # The picture written ended at 2/30 s (6000): the keyframe, 2 s later, goes there.
        self.assertEqual(self.take(6, 0, 183_000, keyframe=True), (6000, 6000))
        self.assertEqual(self.take(7, 1, 97_600), (3200, 3200), "the sound from the keyframe on, as shifted")
        self.assertEqual(self.follower.lost, 0)


def load_example():
    path = os.path.join(HERE, "..", "..", "examples", "python", "encoded.py")
    spec = importlib.util.spec_from_file_location("encoded_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPS = bytes.fromhex("67640028acd940780227e5c04400000300040000030" "0f03c60c658")
PPS = bytes.fromhex("68ef8fcb")


class EncodedHandlerTests(unittest.TestCase):
    """examples/python/encoded.py through the SDK, against a daemon of a few lines."""

    def run_handler(self, script, features=("encoded-samples",)):
        ours, theirs = socket.socketpair()
        daemon = wire.Connection(theirs)
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, "out.h264")
        seen = []
        failures = []

        def serve_daemon():
            hello = daemon.receive()
            welcome = {"features": list(features), "maxDescriptors": 4, "maxPayload": 1 << 20, "protocol": 2}
            daemon.send_json(wire.WELCOME, dict(welcome, revision="2.9", server="fake"), seq=hello.seq)
            daemon.send_json(wire.BROADCAST_STARTED, {"broadcast": 3, "url": path, "setupInfo": {}})
            try:
                script(daemon, seen)
            except Exception as e:  # the handler still gets its finish, and the test fails with this
                failures.append(e)
            daemon.send_json(wire.BROADCAST_FINISHED, {})
            while True:
                try:
                    message = daemon.receive(timeout=2)
                except wire.ConnectionClosed:
                    break
                if message is None:
                    break
                seen.append((message.name, message.payload))

        thread = threading.Thread(target=serve_daemon)
        thread.start()
        handler = load_example().Encoded()
        status = broadcastd.serve(handler, wire.Connection(ours))
        thread.join()
        daemon.close()
        if failures:
            raise failures[0]
        results = [json.loads(p)["result"] for name, p in seen if name == "SET_RESULT"]
        return status, seen, results[-1] if results else None, path

    def test_it_asks_for_h264_and_writes_what_it_gets_as_annex_b(self):
        ring = Ring(64 + 8192)
        self.addCleanup(ring.close)
        avcc = bytes([1, 0x64, 0, 0x28, 0xFF, 0xE1]) + len(SPS).to_bytes(2, "big") + SPS + b"\x01"
        avcc += len(PPS).to_bytes(2, "big") + PPS

        def script(daemon, seen):
            while not seen or seen[-1][0] != "ENCODE":
                message = daemon.receive(timeout=2)
                seen.append((message.name, message.payload))
            self.assertIn("READY", [name for name, _ in seen[:-1]], "ENCODE goes after READY")
            daemon.send_json(wire.ENCODING, {"encoder": 4, "sharedWith": [3]})
            daemon.send(wire.PACKET_RING, wire.encode_json({"ring": 4, "size": ring.size}), fds=(ring.fd,))
            streams = [dict(VIDEO, extradata=base64.b64encode(avcc).decode()), AUDIO]
            daemon.send_json(wire.ENCODED_STREAMS, {"ring": 4, "streams": streams})
            frames = [
                ring.put(1, 64, (5).to_bytes(4, "big") + b"\x65IDR1", stream=0, flags=encoded.KEYFRAME),
                ring.put(2, 80, (4).to_bytes(4, "big") + b"aud", stream=1, flags=encoded.KEYFRAME),
                ring.put(3, 96, (4).to_bytes(4, "big") + b"\x41P1x", stream=0, pts=3000),
            ]
            for frame in frames:
                daemon.send(wire.ENCODED_PACKET, frame.encode())
            daemon.send(wire.PICTURE_UNCHANGED, struct.pack("<q", 500_000_000))

        status, seen, result, path = self.run_handler(script)
        self.assertEqual(status, 0)
        self.assertEqual(json.loads(dict(seen)["ENCODE"]), {"settings": {"audio": "none", "codec": "h264"}})
        self.assertIn("REQUEST_KEYFRAME", [name for name, _ in seen])
        with open(path, "rb") as f:
            written = f.read()
        start = b"\x00\x00\x00\x01"
        self.assertEqual(written, start + SPS + start + PPS + start + b"\x65IDR1" + start + b"\x41P1x")
        self.assertEqual((result["frames"], result["keyframes"], result["lost"], result["encoder"]), (2, 1, 0, 4))

    def test_it_says_so_when_broadcastd_has_no_encoder_for_it(self):
        def script(daemon, seen):
            while not seen or seen[-1][0] != "ENCODE":
                message = daemon.receive(timeout=2)
                seen.append((message.name, message.payload))
            daemon.send_json(wire.ENCODING, {"error": "the encoder could not start: no libx264"})

        status, seen, result, _ = self.run_handler(script)
        failure = [json.loads(p) for name, p in seen if name == "FINISH_WITH_ERROR"]
        self.assertEqual(len(failure), 1, seen)
        self.assertIn("no shared encoder", failure[0]["message"])
        self.assertIn("no libx264", failure[0]["message"])
        self.assertIn("no libx264", result["error"])

    def test_an_older_daemon_is_not_asked(self):
        status, seen, result, _ = self.run_handler(lambda daemon, seen: None, features=("commands",))
        names = [name for name, _ in seen]
        self.assertNotIn("ENCODE", names)
        self.assertIn("does not offer encoded samples", result["error"])

    def test_parameter_sets_and_packets_in_either_form_come_out_as_annex_b(self):
        example = load_example()
        start = b"\x00\x00\x00\x01"
        annex = start + SPS + start + PPS
        self.assertEqual(example.parameter_sets(annex), (annex, 0))
        avcc = bytes([1, 0x64, 0, 0x28, 0xFF, 0xE1, 0, len(SPS)]) + SPS + bytes([1, 0, len(PPS)]) + PPS
        self.assertEqual(example.parameter_sets(avcc), (annex, 4))
        self.assertEqual(example.annex_b(b"\x00\x00\x00\x02ab\x00\x00\x00\x01c", 4), start + b"ab" + start + b"c")


if __name__ == "__main__":
    unittest.main()
