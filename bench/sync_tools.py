"""bench/sync.sh's helpers: the flasher (a white flash on the X screen for each beep pipewire-test-beeps
says PipeWire plays, and the low-latency clients that change the graph's quantum) and the analysis (each
flash's first bright frame and each beep's onset in a recording, found with ffmpeg)."""
import json
import os
import signal
import struct
import subprocess
import sys
import time


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def flash(beeps_cmd, out_path, changes, silence, env):
    """Runs the beep player; for beep k draws a white screen at its time plus (13 k mod 33) ms (so the flashes
    meet a 30 fps capture's frames at every phase), black again 150 ms later; 50 ms after the beeps in
    `changes` starts a client asking for a 256-sample quantum (pw-play --latency=256) for 5 s. Writes one
    JSON line per flash: beep, played, asked, drawn (ns), and one per quantum change or glitch the player
    reports."""
    from Xlib import X, display
    d = display.Display()
    screen = d.screen()
    root = screen.root
    width, height = screen.width_in_pixels, screen.height_in_pixels
    white = root.create_gc(foreground=screen.white_pixel)
    black = root.create_gc(foreground=screen.black_pixel)
    root.fill_rectangle(black, 0, 0, width, height)
    d.sync()
    player = subprocess.Popen(beeps_cmd, stdout=subprocess.PIPE, text=True, env=env)
    clients = []
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(out_path, "w") as out:
        for line in player.stdout:
            if stop:
                break
            words = line.split()
            if words[0] in ("glitch", "quantum"):
                out.write(json.dumps({"glitch": int(words[-1])}) + "\n")
                continue
            if words[0] != "beep":
                continue
            k, played = int(words[1]), int(words[2])
            due = played + (13 * k % 33) * 1_000_000
            while now_ns() < due - 2_000_000:
                time.sleep(0.001)
            while now_ns() < due:
                pass
            asked = now_ns()
            root.fill_rectangle(white, 0, 0, width, height)
            d.sync()
            drawn = now_ns()
            out.write(json.dumps({"beep": k, "played": played, "asked": asked, "drawn": drawn}) + "\n")
            out.flush()
            time.sleep(0.05)
            if k in changes:
                clients.append((time.monotonic() + 5, subprocess.Popen(
                    ["pw-play", "--latency=256", "--target", "demo_speakers", silence], env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
            time.sleep(0.1)
            root.fill_rectangle(black, 0, 0, width, height)
            d.sync()
            for due_end, client in [c for c in clients if c[0] < time.monotonic()]:
                client.kill()
                client.wait()
                clients.remove((due_end, client))
    for _, client in clients:
        client.kill()
        client.wait()
    player.kill()
    player.wait()


def bright_frames(path):
    """File times (s) of the first bright frame of each flash."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time",
                            "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout.split()
    times = [float(t.split(",")[0]) for t in probe if t.split(",")[0] not in ("", "N/A")]
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                          "-vf", "scale=32:18", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                         capture_output=True, check=True).stdout
    size = 32 * 18
    lit = [sum(raw[i:i + size]) / size > 128 for i in range(0, len(raw) - size + 1, size)]
    return [t for i, t in enumerate(times[:len(lit)]) if lit[i] and (i == 0 or not lit[i - 1])]


def onsets(path):
    """File times (s) where each beep starts in the first audio track (first channel)."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-map", "0:a:0", "-af", "pan=mono|c0=c0",
                          "-ar", "48000", "-f", "f32le", "-"], capture_output=True, check=True).stdout
    samples = struct.unpack(f"<{len(raw) // 4}f", raw)
    found, i = [], 0
    while i < len(samples):
        if abs(samples[i]) > 0.3:
            found.append(i / 48000)
            i += 24000
        else:
            i += 1
    return found


def offsets(path, flashes, glitches):
    """Beep onset minus where its flash says, ms, per flash (in order), for one recording: capture time
    minus file time is pinned by the flashes (no frame is grabbed before its flash was asked for)."""
    frames = bright_frames(path)
    beeps = onsets(path)
    # Flashes drawn before the recording started are not in it: align on the last ones.
    count = min(len(frames), len(flashes))
    pairs = list(zip(flashes[-count:], frames[-count:]))
    low = max(f["asked"] / 1e9 - t for f, t in pairs)
    offset = low + 0.001
    result = []
    for f, _ in pairs:
        if any(-400_000_000 < g - f["played"] < 100_000_000 for g in glitches):
            continue
        expected = f["played"] / 1e9 - offset
        onset = min(beeps, key=lambda b: abs(b - expected))
        result.append((f["played"] / 1e9, (onset - expected) * 1000))
    return result


def summary(result):
    """first, mean, max |offset| and the trend (ms a minute, least squares) of (time, offset) pairs."""
    if len(result) < 2:
        return None
    ts = [t for t, _ in result]
    xs = [x for _, x in result]
    mt, mx = sum(ts) / len(ts), sum(xs) / len(xs)
    slope = sum((t - mt) * (x - mx) for t, x in result) / max(1e-9, sum((t - mt) ** 2 for t in ts))
    return {"first": xs[0], "mean": mx, "max": max(xs, key=abs), "trend": slope * 60, "marks": len(xs),
            "first10s": [x for t, x in result if t < ts[0] + 10]}


if __name__ == "__main__":
    if sys.argv[1] == "flash":
        flash(sys.argv[2].split(), sys.argv[3], set(int(c) for c in sys.argv[4].split(",") if c), sys.argv[5],
              dict(os.environ))
