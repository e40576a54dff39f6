"""Helpers for bench/record.sh (standard library and python3-xlib only; run with /usr/bin/python3).

    animate                 draws moving content on $DISPLAY at 30 fps until SIGTERM (see Animation)
    watch TARGET...         polls /proc of each TARGET (PID, or child:PID for PID's first child, such as the
                            handler broadcastd launches) until they exit or SIGTERM: peak RSS and its parts
    avsync FILE             A/V offset of the sync marks in FILE (broadcastd --sync-marks), as JSON
"""
import array
import json
import math
import os
import random
import signal
import subprocess
import sys
import time


# --- animate ---------------------------------------------------------------------------------
class Animation:
    """What an X11 screen recording typically shows, changing every frame at 30 fps:

    - a "document" 1200x720 (dark text of many colours on white, as in an editor or a browser) that
      scrolls up smoothly by 4 px a frame (a new 16 px line every 4 frames);
    - a 240x160 box whose colour changes every frame, bouncing (12 px a frame across, 7 down) in the band
      below the document, 1920x280;
    - the pointer, moving on a circle (x11grab and broadcastd both draw it in).
    The sequence is deterministic (frame n of a run of the animation is always the same); it is drawn on the root
    window, under xclock's window and over xsetroot's solid background, which bench/record.sh sets up.
    """

    FPS = 30
    DOC = (600, 60, 1200, 720)   # x, y, w, h
    BAND = (0, 800, 1920, 280)    # where the box bounces
    LINE = 16
    STEP = 4
    BOX = (240, 160)

    def __init__(self):
        from Xlib import X, display
        self.X = X
        self.d = display.Display()
        screen = self.d.screen()
        self.root = screen.root
        geometry = self.root.get_geometry()
        self.width, self.height = geometry.width, geometry.height
        self.depth = screen.root_depth
        self.gc = self.root.create_gc(graphics_exposures=False)
        self.rng = random.Random(1)
        x, y, w, h = self.DOC
        self.paper = 0xFFFFFF
        self.fill(self.root, self.paper, x, y, w, h)
        self.line = self.root.create_pixmap(w, self.LINE, self.depth)
        self.lines = 0
        self.box = None
        for row in range(h // self.LINE):   # the document starts full
            self.next_line()
            self.root.copy_area(self.gc, self.line, 0, 0, w, self.LINE, x, y + row * self.LINE)

    def fill(self, drawable, rgb, x, y, w, h):
        self.gc.change(foreground=rgb)
        drawable.fill_rectangle(self.gc, x, y, w, h)

    def next_line(self):
        """Draws the next line of the document into the pixmap: words of 2-12 letters in a few colours, indented."""
        w = self.DOC[2]
        self.fill(self.line, self.paper, 0, 0, w, self.LINE)
        rng = self.rng
        if self.lines % 9 != 8:   # a blank line now and then
            x = 8 + 24 * rng.randrange(0, 4)
            while x < w - 80:
                word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_0123456789") for _ in range(rng.randrange(2, 13)))
                colour = rng.choice([0x202020, 0x202020, 0x202020, 0x0000C0, 0xA01010, 0x107010, 0x806000])
                self.gc.change(foreground=colour, background=self.paper)
                self.line.image_text(self.gc, x, 12, word)
                x += 6 * (len(word) + 1)
        self.lines += 1

    def frame(self, n):
        x, y, w, h = self.DOC
        # Scroll the document up by STEP, bring in the next STEP rows of the line being revealed.
        self.root.copy_area(self.gc, self.root, x, y + self.STEP, w, h - self.STEP, x, y)
        part = n % (self.LINE // self.STEP)
        if part == 0:
            self.next_line()
        self.root.copy_area(self.gc, self.line, 0, part * self.STEP, w, self.STEP, x, y + h - self.STEP)
        # The bouncing box: erase where it was (the root's background), draw it where it is now.
        bw, bh = self.BOX
        if self.box:
            self.root.clear_area(*self.box)
        band_x, band_y, band_w, band_h = self.BAND
        span_x, span_y = min(band_w, self.width - band_x) - bw, min(band_h, self.height - band_y) - bh
        px, py = (12 * n) % (2 * span_x), (7 * n) % (2 * span_y)
        bx = band_x + (px if px < span_x else 2 * span_x - px)
        by = band_y + (py if py < span_y else 2 * span_y - py)
        hue = (n * 7) % 256
        self.fill(self.root, (hue << 16) | ((255 - hue) << 8) | ((hue * 3) % 256), bx, by, bw, bh)
        self.box = (bx, by, bw, bh)
        # The pointer, on a circle of radius 300 around the screen's centre, once every 4 s.
        a = 2 * math.pi * n / (4 * self.FPS)
        self.root.warp_pointer(int(self.width / 2 + 300 * math.cos(a)), int(self.height / 2 + 300 * math.sin(a)))
        self.d.sync()


def animate():
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    anim = Animation()
    start = time.monotonic()
    n = 0
    while not stop:
        anim.frame(n)
        n += 1
        delay = start + n / Animation.FPS - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:   # late: skip ahead to the frame due now (the sequence stays tied to time)
            n = int((time.monotonic() - start) * Animation.FPS)
    print(f"animate: {n} frames in {time.monotonic() - start:.1f} s", file=sys.stderr)


# --- watch -----------------------------------------------------------------------------------
def children(pid):
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def read_proc(pid):
    """(name, state, utime+stime ticks, {VmHWM, VmRSS, RssAnon, RssFile, RssShmem: kB}) or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    kb, name = {}, "NA"
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
            kb[key] = int(value.split()[0])
        elif key == "Name":
            name = value.strip()
    return name, fields[0], int(fields[11]) + int(fields[12]), kb


def watch(targets, timeout=900.0):
    """Polls every 0.2 s each target, "PID" or "child:PID" (the first child PID has, waited for), until all
    have exited or SIGTERM comes; then prints one line per target: label=... pid=... name=... ticks=...
    (last reading) and the highest VmHWM, VmRSS, RssAnon, RssFile, RssShmem seen (kB). VmHWM only grows,
    so its last reading is the peak (to within 0.2 s of growth); the RSS parts are the highest polled,
    each on its own (they need not peak together). CPU is better taken from the parent's cutime+cstime
    once it has reaped the process (bench/record.sh does); ticks here are a cross-check."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    deadline = time.monotonic() + timeout
    state = []
    for target in targets:
        kind, _, number = target.rpartition(":")
        state.append({"label": target, "parent": int(number) if kind == "child" else None,
                      "pid": None if kind == "child" else int(number), "done": False,
                      "name": "NA", "ticks": "NA", "max": {}})
    while not stop and time.monotonic() < deadline and not all(t["done"] for t in state):
        for t in state:
            if t["done"]:
                continue
            if t["pid"] is None:
                kids = children(t["parent"])
                if not kids:
                    if not os.path.exists(f"/proc/{t['parent']}"):
                        t["done"] = True
                    continue
                t["pid"] = kids[0]
            reading = read_proc(t["pid"])
            if reading is None or reading[1] in ("Z", "X"):   # gone, or exited and not yet reaped
                t["done"] = True
                continue
            t["name"], _, t["ticks"], kb = reading
            for key, value in kb.items():
                t["max"][key] = max(value, t["max"].get(key, 0))
        time.sleep(0.2)
    for t in state:
        peaks = " ".join(f"{key}={t['max'].get(key, 'NA')}" for key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"))
        print(f"label={t['label']} pid={t['pid']} name={t['name'].replace(' ', '_')} ticks={t['ticks']} {peaks}")


# --- avsync ----------------------------------------------------------------------------------
def avsync(path):
    """Flashes: video frames whose mean luma (decoded as yuv420p, signalstats YAVG) is above 200, at the
    frame's pts (ffprobe). Beeps: the first sample with |x| > 0.5 of channel 0 of audio track 0 after at
    least 0.5 s without one; sample i is at the pts of the first decoded audio frame + i / 48000, which
    holds if the track is contiguous: audio_frame_gaps counts decoded frames that do not start where
    the one before ended."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-f", "lavfi", "-i", f"movie={path},signalstats",
                            "-show_entries", "frame=pts_time:frame_tags=lavfi.signalstats.YAVG", "-of", "csv=p=0"],
                           check=True, capture_output=True, text=True).stdout
    flashes, video_pts = [], []
    for line in probe.splitlines():
        parts = line.split(",")
        if parts[0] not in ("", "N/A"):
            video_pts.append(float(parts[0]))
        if len(parts) >= 2 and parts[1] not in ("", "N/A") and float(parts[1]) > 200:
            flashes.append(float(parts[0]))
    frames = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
                             "frame=pts,nb_samples", "-of", "csv=p=0", path],
                            check=True, capture_output=True, text=True).stdout.split()
    gaps, expected = 0, None
    for f in frames:   # the fields in ffprobe's order: pts, nb_samples (time base 1/48000)
        pts, count = (int(v) for v in f.split(",")[:2])
        if expected is not None and pts != expected:
            gaps += 1
        expected = pts + count
    first = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-read_intervals", "%+#1",
                            "-show_entries", "frame=pts_time", "-of", "csv=p=0", path],
                           check=True, capture_output=True, text=True).stdout.split()[0].split(",")
    rate = 48000
    raw = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", path, "-map", "0:a:0", "-af", "pan=mono|c0=c0",
                          "-ar", str(rate), "-f", "f32le", "-"], check=True, capture_output=True).stdout
    samples = array.array("f")
    samples.frombytes(raw)
    t0 = float(first[0])
    onsets, last = [], -rate
    for i, x in enumerate(samples):
        if x > 0.5 or x < -0.5:
            if i - last > rate // 2:
                onsets.append(t0 + i / rate)
            last = i
    marks = []
    for flash in flashes:
        near = min(onsets, key=lambda t: abs(t - flash), default=None)
        if near is not None and abs(near - flash) < 0.5:
            marks.append({"flash": round(flash, 6), "beep": round(near, 6), "offset_ms": round((near - flash) * 1000, 3)})
        else:
            marks.append({"flash": round(flash, 6), "beep": None, "offset_ms": None})
    print(json.dumps({"file": path, "flashes": len(flashes), "beeps": len(onsets), "audio_start": t0,
                      "audio_seconds": len(samples) / rate, "audio_frame_gaps": gaps,
                      "video_first_pts": video_pts[:3], "video_frames": len(video_pts), "marks": marks}))


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "animate":
        animate()
    elif command == "watch" and len(sys.argv) >= 3:
        watch(sys.argv[2:])
    elif command == "avsync" and len(sys.argv) == 3:
        avsync(sys.argv[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
