#!/usr/bin/env python3
"""python-encoded: an example broadcastd handler that takes encoded samples (protocol revision 2.9, see README.md).

It asks broadcastd for H.264 without audio (ENCODE {"codec": "h264", "audio": "none"}), shares the encoder broadcastd
runs for every handler that asks for the same, and writes the video it gets to the broadcast URL's file as a raw
H.264 stream (Annex B, `.h264`), the parameter sets before each keyframe. Its result says what it wrote. If
broadcastd has no shared encoder for it (ENCODING's `error`, or a daemon older than 2.9), it says so and finishes
the broadcast with that error: it has no encoder of its own.

A raw H.264 stream has no timestamps: players take 25 frames per second unless told (`ffplay -framerate 30 x.h264`;
`ffmpeg -framerate 30 -i x.h264 -c copy x.mp4`), and a picture that stood still was not encoded again.
"""

import base64
import os
import sys
from urllib.parse import unquote, urlparse

import broadcastd as bd  # pip install ./python (docs/protocol.md section 19)

SETTINGS = {"codec": "h264", "audio": "none"}
START_CODE = b"\x00\x00\x00\x01"


def output_path(url):
    parsed = urlparse(url or "")
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme == "" and url:
        return url
    raise ValueError(f"cannot write H.264 to {url!r}: use a file:// URL or a path")


def parameter_sets(extradata):
    """The stream's parameter sets in Annex B form, and the length of the NAL size fields of its packets (0: the
    packets are Annex B already). libx264's global header is Annex B; an `avcC` record (it starts with 1) is
    converted."""
    if extradata[:3] == b"\x00\x00\x01" or extradata[:4] == START_CODE or not extradata:
        return extradata, 0
    if extradata[0] != 1 or len(extradata) < 7:
        raise ValueError("the H.264 global header is neither Annex B nor avcC")
    length_size = (extradata[4] & 3) + 1
    units, at = [], 5
    for count_mask in (0x1F, 0xFF):  # sequence parameter sets, then picture parameter sets
        count = extradata[at] & count_mask
        at += 1
        for _ in range(count):
            size = int.from_bytes(extradata[at : at + 2], "big")
            units.append(START_CODE + extradata[at + 2 : at + 2 + size])
            at += 2 + size
    return b"".join(units), length_size


def annex_b(data, length_size):
    """A packet whose NAL units are length-prefixed (avcC), as Annex B."""
    if length_size == 0:
        return data
    units, at = [], 0
    while at + length_size <= len(data):
        size = int.from_bytes(data[at : at + length_size], "big")
        units.append(START_CODE + data[at + length_size : at + length_size + size])
        at += length_size + size
    return b"".join(units)


class Encoded(bd.SampleHandler):
    client_name = "python-encoded"

    def __init__(self):
        super().__init__()
        self.file = None
        self.path = None
        self.follower = None
        self.video = None
        self.headers = b""
        self.length_size = 0
        self.encoder = None
        self.problem = None
        self.counts = {"frames": 0, "keyframes": 0, "bytes": 0, "lastPts": None}

    def fail(self, message):
        self.problem = message
        print(f"python-encoded: {message}", file=sys.stderr, flush=True)
        self.finish_with_error(message)

    def broadcast_started(self, setup_info):
        self.path = output_path(self.url)
        if self.offers("encoded-samples") is False:
            return self.fail(f"{self.welcome.get('server')} does not offer encoded samples (protocol revision 2.9)")
        self.file = open(self.path, "wb")
        self.set_broadcast_result({"file": self.path})
        self.request_encoding(SETTINGS)

    def encoding_answered(self, encoder, shared_with, error):
        if error is not None or encoder is None:
            return self.fail(f"broadcastd gave no shared encoder for {SETTINGS}: {error}")
        self.encoder = {"encoder": encoder, "sharedWith": shared_with}

    def encoded_streams(self, streams):
        self.follower = bd.EncodedFollower(streams, self.request_keyframe)
        self.video = self.follower.video
        stream = streams[self.video]
        if stream.get("codec") != "h264":
            return self.fail(f"the shared encoder's video is {stream.get('codec')}, not h264")
        self.headers, self.length_size = parameter_sets(base64.b64decode(stream.get("extradata") or ""))

    def encoded_packet(self, packet, data):
        if self.follower is None or self.problem is not None:
            return
        times = self.follower.take(packet, data)
        if times is None or packet.stream != self.video:
            return
        if packet.keyframe:
            self.file.write(self.headers)
            self.counts["keyframes"] += 1
        payload = annex_b(data, self.length_size)
        self.file.write(payload)
        self.counts["frames"] += 1
        self.counts["bytes"] += len(payload)
        self.counts["lastPts"] = times[0]

    def broadcast_paused(self):
        if self.follower is not None:
            self.follower.pause()

    def broadcast_resumed(self):
        if self.follower is not None:
            self.follower.resume()

    def broadcast_finished(self, error):
        if self.file is not None:
            self.file.close()
        if self.file is not None and (self.discard or self.counts["frames"] == 0):
            os.unlink(self.path)  # discarded, or nothing came: no empty file is left
            self.file = None
        if self.discard:
            return self.set_broadcast_result({"discarded": True})
        result = dict(self.counts, settings=SETTINGS)
        if self.file is not None:
            result["file"] = self.path
        if self.encoder is not None:
            result.update(self.encoder)
        if self.follower is not None:
            result.update(lost=self.follower.lost, keyframesAsked=self.follower.keyframes_asked)
            base = self.follower.time_bases[self.video]
            if self.counts["lastPts"] is not None:
                result["lastPts"] = self.counts["lastPts"] * base[0] / base[1]  # seconds on its own time line
        if self.problem is not None:
            result["error"] = self.problem
        self.set_broadcast_result(result)


if __name__ == "__main__":
    bd.run(Encoded())
