#!/usr/bin/env python3
"""python-counter: an example broadcastd sample handler (see README.md).

Counts the samples of each stream, checks that each stream's timestamps increase, records the
callbacks in order and, when the broadcast finishes, writes a JSON summary to the broadcast URL
(a file:// URL or a plain path).

Setup info, for exercising error paths:
  failAfter=N   finish the broadcast with an error after N video samples
  crashAfter=N  die of SIGSEGV after N video samples
"""

import json
import os
import signal
import sys
from urllib.parse import unquote, urlparse

import broadcastd as bd  # pip install ./python (docs/protocol.md section 19)

STREAMS = ("video", "audioApp", "audioMic", "videoCamera")  # videoCamera: revision 2.8, with setup camera=on


def summary_path(url):
    if not url:
        return None
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme == "":
        return url
    raise ValueError(f"cannot write a summary to {url!r}: use a file:// URL or a path")


def count_setting(setup_info, key):
    value = (setup_info.get(key) or "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"setup field {key} must be a whole number, not {value!r}") from None


class Counter(bd.SampleHandler):
    client_name = "python-counter"

    def __init__(self):
        super().__init__()
        self.callbacks = []
        self.counts = {s: 0 for s in STREAMS}
        self.non_monotonic = {s: 0 for s in STREAMS}
        self.first_pts = {s: None for s in STREAMS}
        self.last_pts = {s: None for s in STREAMS}
        self.video_checksum = 0
        self.setup_info = {}
        self.camera = None  # revision 2.8: {"name", "formats", "lost"} once CAMERA_FORMAT came
        self.fail_after = None
        self.crash_after = None
        self.failed = False

    def record(self, name):
        if name == "samples" and self.callbacks and self.callbacks[-1] == "samples":
            return
        self.callbacks.append(name)

    def broadcast_started(self, setup_info):
        self.record("broadcastStarted")
        self.setup_info = setup_info
        self.fail_after = count_setting(setup_info, "failAfter")
        self.crash_after = count_setting(setup_info, "crashAfter")

    def process_sample(self, kind, header, data):
        self.record("samples")
        self.counts[kind] += 1
        last = self.last_pts[kind]
        if last is not None and header.pts <= last:
            self.non_monotonic[kind] += 1
        if self.first_pts[kind] is None:
            self.first_pts[kind] = header.pts
        self.last_pts[kind] = header.pts
        if kind != "video":
            return
        y = header.planes[0].offset if header.planes else 0
        self.video_checksum = (self.video_checksum + data[y]) % 2**32
        n = self.counts["video"]
        if self.crash_after is not None and n >= self.crash_after:
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.fail_after is not None and n >= self.fail_after and not self.failed:
            self.failed = True
            self.finish_with_error(f"counter: failing on request after {self.fail_after} video samples")

    def camera_changed(self, camera, video, lost):
        self.record("cameraChanged")
        if self.camera is None:
            self.camera = {"name": camera, "formats": [], "lost": None}
        if video is not None:
            self.camera["formats"].append(f"{video['width']}x{video['height']} {video['format']}")
        self.camera["lost"] = lost

    def handle_command(self, name, arguments):
        """count [stream=NAME]: the samples so far; fail: answers with an error; hang: never answers."""
        self.record("command " + name)
        if name == "count":
            stream = arguments.get("stream")
            if stream is not None and stream not in STREAMS:
                raise ValueError(f"no stream {stream!r} (streams: {', '.join(STREAMS)})")
            return {"counts": {stream: self.counts[stream]} if stream else dict(self.counts)}
        if name == "fail":
            raise RuntimeError("failing on request")
        if name == "hang":
            return None  # never answered: broadcastd tells the controller after 10 s
        raise ValueError(f"unknown command {name!r}")

    def broadcast_paused(self):
        self.record("broadcastPaused")

    def broadcast_resumed(self):
        self.record("broadcastResumed")

    def broadcast_finished(self, error):
        self.record("broadcastFinished")
        summary = {
            "callbacks": self.callbacks,
            "counts": self.counts,
            "nonMonotonic": self.non_monotonic,
            "firstPts": self.first_pts,
            "lastPts": self.last_pts,
            "videoChecksum": self.video_checksum,
            "setupInfo": self.setup_info,
            "camera": self.camera,
            "error": error,
        }
        text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
        path = summary_path(self.url)
        if self.discard:  # `broadcastctl discard`: the summary is not written, and one from before is kept
            self.set_broadcast_result({"discarded": True})
            return
        if path is None:
            sys.stdout.write(text)
            return
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w") as f:
            f.write(text)
        os.replace(temporary, path)


if __name__ == "__main__":
    bd.run(Counter())
