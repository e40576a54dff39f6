#!/usr/bin/env python3
"""A status-bar module for broadcastd: shows while the screen is captured, from the feed of
`broadcastctl status --watch --json` (one JSON event a line: state changes, service info, finishes).

Prints a line each time what the bar shows changes:
  --format waybar (default)  {"text": "● REC 1:02", "class": "live", "tooltip": "broadcast 1 (record): live"}
                             for a waybar custom module with "return-type": "json"; "● REC 1:02 + CAM" while
                             a camera is captured too (the tooltip names it, or says it was lost)
  --format text              the text alone, for polybar's custom/script with tail = true
Nothing is captured: the text is empty and the class "idle". When broadcastd goes away the feed ends and
so does this (exit status 1): let the bar run it again (waybar: restart-interval; polybar: it reruns it).
"""
import argparse
import json
import subprocess
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--format", choices=["waybar", "text"], default="waybar")
parser.add_argument("--socket", help="broadcastd's socket (default: broadcastctl's)")
parser.add_argument("--broadcastctl", default="broadcastctl", help="the broadcastctl program")
args = parser.parse_args()

command = [args.broadcastctl, "status", "--watch", "--json"] + (["--socket", args.socket] if args.socket else [])
feed = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
broadcasts = {}  # id -> {"state", "handler", "elapsed", "camera", "cameraLost"}
shown = None


def clock(seconds):
    seconds = int(seconds or 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02}:{seconds % 60:02}" if seconds >= 3600 else f"{seconds // 60}:{seconds % 60:02}"


def show():
    global shown
    live = [b for b in broadcasts.values() if b["state"] == "live"]
    paused = [b for b in broadcasts.values() if b["state"] == "paused"]
    if live:
        text, state = f"● REC {clock(max(b['elapsed'] for b in live))}", "live"
    elif paused:
        text, state = "❚❚ paused", "paused"
    else:
        text, state = "", "idle"
    if len(live) + len(paused) > 1:
        text += f" ({len(live) + len(paused)})"
    if any(b.get("camera") and not b.get("cameraLost") for b in live + paused):
        text += " + CAM"

    def camera(b):
        if not b.get("camera"):
            return ""
        return f", camera {b['camera']}" + (" lost" if b.get("cameraLost") else "")

    tooltip = "\n".join(f"broadcast {i} ({b['handler']}): {b['state']}{camera(b)}" for i, b in sorted(broadcasts.items())) or "broadcastd: idle"
    line = json.dumps({"text": text, "class": state, "tooltip": tooltip}, ensure_ascii=False) if args.format == "waybar" else text
    if line != shown:
        print(line, flush=True)
        shown = line


show()
for raw in feed.stdout:
    event = json.loads(raw)
    id = event.get("broadcast")
    if id is None:
        continue
    if "state" in event:
        if event["state"] in ("finished", "idle"):
            broadcasts.pop(id, None)
        else:
            broadcasts[id] = {"state": event["state"], "handler": event.get("handler", "?"), "elapsed": event.get("elapsed", 0),
                              "camera": event.get("camera"), "cameraLost": event.get("cameraLost")}
    elif "elapsed" in event and id in broadcasts:
        broadcasts[id]["elapsed"] = event["elapsed"]
    show()
sys.exit(feed.wait() or 1)
