"""The package against protocol.json (opcodes, layouts, golden bytes), and its clients' logic, without a daemon."""

import json
import os
import socket
import struct
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import broadcastd  # noqa: E402
from broadcastd import check, encoded, relay, wire  # noqa: E402


class DescriptionTests(unittest.TestCase):
    def setUp(self):
        self.description = broadcastd.description()

    def test_the_package_ships_the_description_of_its_revision(self):
        self.assertEqual(self.description["revision"], broadcastd.REVISION)
        self.assertEqual(self.description["version"], wire.PROTOCOL_VERSION)

    def test_every_opcode_is_the_descriptions(self):
        described = {m["name"]: int(m["opcode"], 16) for m in self.description["messages"]}
        self.assertEqual(described, wire.OPCODES)

    def test_the_binary_layouts_are_the_descriptions(self):
        layouts = self.description["layouts"]
        self.assertEqual(wire._VIDEO.size, layouts["videoSample"]["size"])
        self.assertEqual(wire._AUDIO.size, layouts["audioSample"]["size"])
        self.assertEqual(wire._CURSOR.size, layouts["cursor"]["size"])
        self.assertEqual(wire._RELEASE.size, layouts["releaseSlot"]["size"])
        # A video sample's fields where the description puts them: each value distinct.
        values = dict(
            pts=0x0102030405060708,
            duration=0x1112131415161718,
            sequence=0x2122232425262728,
            flags=3,
            orientation=270,
            mirrored=1,
            reserved=0,
            pool=0x31323334,
            slot=0x41424344,
            width=1920,
            height=1080,
            fourcc=0x30323449,
            byteCount=3110400,
        )
        packed = wire._VIDEO.pack(*values.values())
        fields = [f for f in layouts["videoSample"]["fields"] if f["name"] != "timing"] + layouts["sampleTiming"][
            "fields"
        ]
        for field in fields:
            got = int.from_bytes(packed[field["offset"] : field["offset"] + field["size"]], "little")
            self.assertEqual(got, values[field["name"]], field["name"])
        header = wire.VideoHeader.decode(packed)
        self.assertEqual(
            (header.pool, header.slot, header.byte_count, header.repeated), (0x31323334, 0x41424344, 3110400, True)
        )

    def test_the_golden_bytes_encode_back(self):
        for example in self.description["golden"]:
            data = bytes.fromhex(example["hex"])
            size, opcode, fds, seq = wire.HEADER.unpack_from(data)
            self.assertEqual(wire.OPCODE_NAMES[opcode], example["message"])
            payload = data[12:]
            self.assertEqual(size, len(payload), example["name"])
            if opcode in (wire.VIDEO_SAMPLE, wire.CURSOR, wire.CAMERA_SAMPLE):
                continue  # binary: checked above and by the Swift tests
            if opcode == wire.RELEASE_SLOT:
                payload = wire.release_slot_payload(*struct.unpack("<II", payload))
            elif opcode == wire.ENCODED_PACKET:  # revision 2.9
                payload = encoded.EncodedPacket.decode(payload).encode()
            elif opcode == wire.PICTURE_UNCHANGED:
                payload = struct.pack("<q", encoded.picture_unchanged_through(payload))
            else:
                payload = wire.encode_json(json.loads(payload))
            self.assertEqual(wire.encode(opcode, payload, seq, fds), data, example["name"])


class ControllerTests(unittest.TestCase):
    """A controller against a daemon of a few lines that announces features without commands."""

    def serve(self, features):
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, "s.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        self.seen = []

        def daemon():
            connection = wire.Connection(listener.accept()[0])
            hello = connection.receive()
            self.seen.append(hello.opcode)
            welcome = {"maxDescriptors": 4, "maxPayload": 1048576, "protocol": 2, "server": "fake"}
            if features is not None:
                welcome.update(revision="2.6", features=features)
            connection.send_json(wire.WELCOME, welcome, seq=hello.seq)
            while True:
                try:
                    message = connection.receive(timeout=2)
                except wire.ConnectionClosed:
                    break
                if message is None:
                    break
                self.seen.append(message.opcode)
                connection.send_json(
                    wire.COMMAND_RESULT, {"broadcast": 1, "command": "x", "result": {"ok": True}}, seq=message.seq
                )
            connection.close()
            listener.close()

        thread = threading.Thread(target=daemon)
        thread.start()
        return path, thread

    def test_what_the_daemon_does_not_offer_is_refused_before_it_is_sent(self):
        path, thread = self.serve(["several-broadcasts"])
        with broadcastd.Controller(path, client="t") as controller:
            self.assertEqual(controller.revision, "2.6")
            self.assertIs(controller.offers("commands"), False)
            with self.assertRaises(broadcastd.Unsupported) as refused:
                controller.send_command("save")
            self.assertIn("'commands'", str(refused.exception))
            with self.assertRaises(broadcastd.Unsupported):
                controller.change_capture(region="0,0,64x64")
        thread.join()
        self.assertEqual(self.seen, [wire.HELLO])

    def test_a_daemon_that_announces_nothing_is_asked(self):
        path, thread = self.serve(None)
        with broadcastd.Controller(path, client="t") as controller:
            self.assertIsNone(controller.offers("commands"))
            self.assertEqual(controller.send_command("x"), {"ok": True})
        thread.join()
        self.assertEqual(self.seen, [wire.HELLO, wire.SEND_COMMAND])


class HandlerTests(unittest.TestCase):
    def test_a_handler_reads_the_announced_features_and_outlives_an_unsupported_answer(self):
        ours, theirs = socket.socketpair()
        daemon = wire.Connection(theirs)

        def serve_daemon():
            hello = daemon.receive()
            welcome = {
                "features": ["commands"],
                "maxDescriptors": 4,
                "maxPayload": 1048576,
                "protocol": 2,
                "revision": "2.6",
                "server": "fake",
            }
            daemon.send_json(wire.WELCOME, welcome, seq=hello.seq)
            daemon.send_json(wire.ERROR, {"code": "unsupported", "message": "no message 0x0400"})
            daemon.send_json(wire.BROADCAST_FINISHED, {})

        thread = threading.Thread(target=serve_daemon)
        thread.start()
        handler = broadcastd.SampleHandler()
        self.assertEqual(broadcastd.serve(handler, wire.Connection(ours)), 0)
        thread.join()
        daemon.close()
        self.assertEqual(handler.revision, "2.6")
        self.assertIs(handler.offers("commands"), True)
        self.assertIs(handler.offers("camera"), False)


class CheckLogicTests(unittest.TestCase):
    def test_fields_are_checked_as_declared(self):
        objects = broadcastd.description()["objects"]
        answer = next(m for m in broadcastd.description()["messages"] if m["name"] == "COMMAND_ANSWER")["payload"][
            "fields"
        ]
        self.assertEqual(relay.check_fields({"id": 1, "result": {}}, answer, objects), [])
        self.assertEqual(relay.check_fields({"result": {}}, answer, objects), ["lacks the required field 'id'"])
        self.assertEqual(
            relay.check_fields({"id": "1"}, answer, objects), ["has 'id' of the wrong type (\"1\", declared integer)"]
        )
        self.assertEqual(
            relay.check_fields({"id": 1, "error": {"code": "x"}}, answer, objects),
            ["lacks the required field 'error.message'"],
        )

    def test_the_declared_bounds_are_checked(self):
        description = broadcastd.description()
        encode = next(m for m in description["messages"] if m["name"] == "ENCODE")["payload"]["fields"]
        objects = description["objects"]
        self.assertEqual(relay.check_fields({"settings": {"codec": "h264"}}, encode, objects), [])
        self.assertEqual(
            relay.check_fields({"settings": {"": "x", "a": "v" * 1025}}, encode, objects),
            [
                "has a name in 'settings' that is empty or over 64 bytes",
                "has a value in 'settings' over 1024 bytes",
            ],
        )
        many = {"settings": {f"k{i}": "v" for i in range(33)}}
        self.assertEqual(relay.check_fields(many, encode, objects), ["has 'settings' of 33 entries (at most 32)"])

    def test_a_slot_released_twice_is_a_problem_in_the_documents_words(self):
        lines = []

        class Log:
            def write(self, text):
                lines.append(json.loads(text))

            def flush(self):
                pass

        checker = relay.Checker(Log(), broadcastd.description())
        checker.up(wire.Message(wire.HELLO, 1, wire.encode_json({"protocol": 2, "role": "handler"})))
        checker.down(wire.Message(wire.POOL, 0, wire.encode_json({"pool": 1, "slots": 10, "slotSize": 4096})))
        checker.down(wire.Message(wire.BROADCAST_STARTED, 0, b"{}"))
        checker.up(wire.Message(wire.READY, 0, b"{}"))
        checker.down(wire.Message(wire.VIDEO_SAMPLE, 0, wire._VIDEO.pack(0, 0, 0, 0, 0, 0, 0, 1, 2, 64, 32, 0, 3072)))
        checker.up(wire.Message(wire.RELEASE_SLOT, 0, wire.release_slot_payload(1, 2)))
        self.assertEqual(lines, [])
        checker.up(wire.Message(wire.RELEASE_SLOT, 0, wire.release_slot_payload(1, 2)))
        checker.up(wire.Message(wire.RELEASE_SLOT, 0, wire.release_slot_payload(7, 0)))
        problems = [line["problem"] for line in lines]
        self.assertEqual(len(problems), 2)
        self.assertIn("slot 2 of pool 1, which it did not hold (already released)", problems[0])
        self.assertIn("section 8.5", problems[0])
        self.assertIn("(wrong pool", problems[1])

    def test_commands_are_parsed_as_broadcastctl_send_takes_them(self):
        self.assertEqual(check.parse_command("save last=30 file='a b'"), ("save", {"last": "30", "file": "a b"}))
        with self.assertRaises(check.CheckError):
            check.parse_command("save 30")


if __name__ == "__main__":
    unittest.main()
