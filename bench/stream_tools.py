#!/usr/bin/env python3
"""Helpers of bench/stream.sh.

receive PORT OUT.json      an SRT listener (ffmpeg, low-delay flags) decoding to small gray frames; for every
                           frame its arrival time (CLOCK_MONOTONIC) and mean luma, written at the end
livestart SOCKET BIN       when the broadcast went live, on CLOCK_MONOTONIC: now - elapsed from
                           `broadcastctl status --json`, the tightest of 15 round trips
watch PID OUT              polls PID's first child (the handler) every 0.1 s: CPU ticks and VmHWM, last seen
report RESULTS.tsv DOC     writes the stream section of docs/benchmarks.md
"""
import json, os, statistics, subprocess, sys, time

W, H = 64, 36


def receive(port, out):
    cmd = ["ffmpeg", "-v", "error", "-fflags", "nobuffer", "-flags", "low_delay", "-probesize", "32768", "-analyzeduration", "0",
           "-i", f"srt://127.0.0.1:{port}?mode=listener", "-vf", f"scale={W}:{H},format=gray", "-flush_packets", "1", "-f", "rawvideo", "-"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    frames = []
    size = W * H
    while True:
        data = p.stdout.read(size)
        if len(data) < size:
            break
        frames.append((time.monotonic(), sum(data) / size))
    p.wait()
    json.dump({"frames": frames}, open(out, "w"))


def livestart(sock, bin_dir):
    samples = []
    deadline = time.monotonic() + 30
    while len(samples) < 15 and time.monotonic() < deadline:
        t0 = time.monotonic()
        s = json.loads(subprocess.run([os.path.join(bin_dir, "broadcastctl"), "status", "--json", "--socket", sock],
                                      capture_output=True, text=True).stdout)
        t1 = time.monotonic()
        if s.get("state") != "live":
            time.sleep(0.05)
            continue
        samples.append(((t0 + t1) / 2 - s["elapsed"], t1 - t0))
        time.sleep(0.02)
    live, width = min(samples, key=lambda x: x[1])
    print("%.6f %.3f" % (live, width / 2 * 1000))


def child_of(pid):
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            kids = open(f"/proc/{pid}/task/{task}/children").read().split()
            if kids:
                return kids[0]
    except OSError:
        pass
    return None


def watch(pid, out):
    last = {}
    while os.path.exists(f"/proc/{pid}"):
        kid = child_of(pid)
        if kid:
            try:
                stat = open(f"/proc/{kid}/stat").read().rsplit(")", 1)[1].split()
                status = dict(l.split(":", 1) for l in open(f"/proc/{kid}/status").read().splitlines() if ":" in l)
                last = {"ticks": int(stat[11]) + int(stat[12]), "hwm_kb": int(status["VmHWM"].split()[0])}
            except (OSError, KeyError, IndexError):
                pass
        with open(out, "w") as f:
            json.dump(last, f)
        time.sleep(0.1)


def latencies(frames, live, fps):
    """Glass-to-receiver latency of each sync-mark (white) frame: its arrival minus its capture time."""
    # Marks are captured at live + k s. The receiver may join late (it decodes from the first keyframe
    # it sees), so k comes from the arrival time: right for latencies from 0.1 s to 1.1 s (SRT's own
    # window is 0.12 s; a latency outside this range would show as a figure far off the others).
    marks = {}
    for t, luma in frames:
        if luma > 200:
            k = int(t - live - 0.1)
            marks.setdefault(k, t)
    return [(t - (live + k)) * 1000 for k, t in sorted(marks.items())]


def report(results, doc):
    sys.path.insert(0, os.path.dirname(__file__))
    from docsection import write_section
    rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(results) if line.strip()]
    ours = [r for r in rows if r["tool"] == "ours"]
    ref = [r for r in rows if r["tool"] == "ffmpeg"]
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    lat = [float(x) for r in ours for x in r["latencies"].split(",") if x]
    p95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))] if xs else float("nan")
    cpu = lambda r: float(r["cpu_s"]) / float(r["seconds"]) * 100
    ours_cpu, ref_cpu = med([cpu(r) for r in ours]), med([cpu(r) for r in ref])
    ours_rss, ref_rss = med([float(r["rss_mb"]) for r in ours]), med([float(r["rss_mb"]) for r in ref])
    per_rep = ", ".join("%.0f" % med([float(x) for x in r["latencies"].split(",") if x]) for r in ours)
    seconds = ours[0]["seconds"] if ours else "?"
    section = f"""<!-- stream-begin -->
## The `stream` handler: glass-to-receiver latency, CPU and memory

Taken with `bash bench/stream.sh` ({len(ours)} runs of each, {seconds} s each) on this machine (2 cores, no GPU),
on loopback: broadcastd's synthetic source at 1920x1080, 30 fps, with `--sync-marks` (a white frame
once a second, captured at the moment the broadcast went live plus whole seconds), the `stream` handler
at its defaults (libx264 veryfast, zerolatency, 4500 kbit/s with a 1 s VBV, keyframes every 2 s; Opus
128 kbit/s of app and mic mixed) sending SRT to an ffmpeg listener that decodes with low-delay flags.
The receiver stamps each decoded frame with CLOCK_MONOTONIC; the live moment comes from `broadcastctl
status` (elapsed against CLOCK_MONOTONIC, the tightest of 15 round trips, within ±{med([float(r['livestart_err_ms']) for r in ours]):.1f} ms).
Latency is a mark's arrival minus its capture: capture, conversion, the pool, the handler's encode, the
send queue, SRT (libsrt's default 120 ms receive latency window is part of it), demuxing and decoding.

| | broadcastd `stream` handler | ffmpeg (testsrc2 → libx264 → SRT, same settings) | ratio |
|---|---|---|---|
| glass-to-receiver latency, median (p95) | {med(lat):.0f} ms ({p95(lat):.0f} ms); per run {per_rep} ms | not measured (no capture clock) | |
| CPU, median, % of one core | {ours_cpu:.1f} % (handler) | {ref_cpu:.1f} % (whole ffmpeg, its test source included) | {ours_cpu / ref_cpu:.2f}× |
| peak RSS, median | {ours_rss:.1f} MB (handler) | {ref_rss:.1f} MB | {ours_rss / ref_rss:.2f}× |

Read the CPU ratio as a rough comparison: both encode the same size, rate and x264 settings, but not
the same picture (ffmpeg's `testsrc2` against broadcastd's scrolling bars, which changes x264's work),
ffmpeg's figure includes generating its pattern, and the handler's includes the audio timeline (two
inputs placed by timestamp, drift-controlled and mixed) that ffmpeg's single sine does not need. The
handler gets its frames from broadcastd, whose capture cost is measured in the sections above.
<!-- stream-end -->
"""
    write_section(doc, "<!-- stream-begin -->", "<!-- stream-end -->", section)
    print(section)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "receive":
        receive(sys.argv[2], sys.argv[3])
    elif cmd == "livestart":
        livestart(sys.argv[2], sys.argv[3])
    elif cmd == "watch":
        watch(sys.argv[2], sys.argv[3])
    elif cmd == "latencies":
        frames = json.load(open(sys.argv[2]))["frames"]
        print(",".join("%.1f" % x for x in latencies(frames, float(sys.argv[3]), 30)))
    elif cmd == "report":
        report(sys.argv[2], sys.argv[3])
