#!/usr/bin/env python3
"""Helpers of bench/stream.sh.

receive PORT OUT.json [LATENCY_US]
                           an SRT listener (ffmpeg, low-delay flags) decoding to small gray frames; for every
                           frame its arrival time (CLOCK_MONOTONIC) and mean luma, written at the end
g2g FRAMES.json FLASHES.json
                           glass-to-glass latency of each flash (bench/flasher.py): the first bright frame the
                           receiver decoded after it, minus the flash's time; ms, comma-separated, then the
                           number of flashes never seen
report-g2g RESULTS.tsv DOC writes the glass-to-glass and simulcast section of docs/benchmarks.md
livestart SOCKET BIN       when the broadcast went live, on CLOCK_MONOTONIC: now - elapsed from
                           `broadcastctl status --json`, the tightest of 15 round trips
watch PID OUT              polls PID's first child (the handler) every 0.1 s: CPU ticks and VmHWM, last seen
report RESULTS.tsv DOC     writes the stream section of docs/benchmarks.md
"""
import json, os, statistics, subprocess, sys, time

W, H = 64, 36


def receive(port, out, latency=None):
    url = f"srt://127.0.0.1:{port}?mode=listener" + (f"&latency={latency}" if latency else "")
    cmd = ["ffmpeg", "-v", "error", "-fflags", "nobuffer", "-flags", "low_delay", "-probesize", "32768", "-analyzeduration", "0",
           "-i", url, "-vf", f"scale={W}:{H},format=gray", "-vsync", "passthrough", "-flush_packets", "1", "-f", "rawvideo", "-"]
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


def watch(pid, out, settle=None):
    """The handler's (broadcastd's child's) utime+stime in ticks and peak RSS, rewritten to OUT every 0.1 s while
    broadcastd lives. With SETTLE (s): also its ticks SETTLE s after it was first seen (`settled_ticks`, at
    `settled_at`) and when it was last seen (`at`), both CLOCK_MONOTONIC: its CPU once connected, start-up aside."""
    last = {}
    first = None
    while os.path.exists(f"/proc/{pid}"):
        kid = child_of(pid)
        if kid:
            try:
                stat = open(f"/proc/{kid}/stat").read().rsplit(")", 1)[1].split()
                status = dict(l.split(":", 1) for l in open(f"/proc/{kid}/status").read().splitlines() if ":" in l)
                now = time.monotonic()
                first = first or now
                last.update(ticks=int(stat[11]) + int(stat[12]), hwm_kb=int(status["VmHWM"].split()[0]), at=now)
                if settle is not None and "settled_ticks" not in last and now - first >= settle:
                    last.update(settled_ticks=last["ticks"], settled_at=now)
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
    lat = [float(x) for r in ours for x in r["latencies"].split(",") if x and x != "-"]
    p95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))] if xs else float("nan")
    cpu = lambda r: float(r["cpu_s"]) / float(r["seconds"]) * 100
    ours_cpu, ref_cpu = med([cpu(r) for r in ours]), med([cpu(r) for r in ref])
    ours_rss, ref_rss = med([float(r["rss_mb"]) for r in ours]), med([float(r["rss_mb"]) for r in ref])
    per_rep = ", ".join("%.0f" % med([float(x) for x in r["latencies"].split(",") if x and x != "-"]) for r in ours)
    seconds = ours[0]["seconds"] if ours else "?"
    section = f"""<!-- stream-begin -->
## The `stream` handler: glass-to-receiver latency, CPU and memory

Taken with `bash bench/stream.sh` ({len(ours)} runs of each, {seconds} s each) on this machine (2 cores, no GPU){os.environ.get("BENCH_LOAD_NOTE", "")},
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


def g2g(frames, flashes):
    """Each flash's latency: the first bright frame of the next bright stretch decoded after it, in turn, so that a
    flash's frames that come late (after the next flash) count for it and not for the next one. A flash with no bright
    stretch within 2 s is missed. Flashes before the receiver's first frame (it starts on a keyframe, after probing)
    are not counted."""
    found, missed = [], 0
    start = frames[0][0] if frames else float("inf")
    # When each bright stretch began (a bright frame after a dark one), in arrival order.
    stretches = [arrival for i, (arrival, luma) in enumerate(frames) if luma > 128 and (i == 0 or frames[i - 1][1] <= 128)]
    taken = 0
    for t in flashes:
        if t < start:
            continue
        while taken < len(stretches) and stretches[taken] < t:
            taken += 1
        if taken < len(stretches) and stretches[taken] - t <= 2.0:
            found.append((stretches[taken] - t) * 1000)
            taken += 1
        else:
            missed += 1
    return found, missed


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else float("nan")


def report_g2g(results, doc):
    sys.path.insert(0, os.path.dirname(__file__))
    from docsection import write_section
    rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(results) if line.strip()]
    tools = ("ours", "ffmpeg", "ours-noaudio", "ours-own")
    lat = {tool: [float(x) for r in rows if r["part"] == "g2g" and r["tool"] == tool for x in r["latencies"].split(",") if x and x != "-"]
           for tool in tools}
    missed = {tool: sum(int(r["missed"]) for r in rows if r["part"] == "g2g" and r["tool"] == tool) for tool in tools}
    per_run = {tool: ", ".join("%.0f" % statistics.median([float(x) for x in r["latencies"].split(",") if x and x != "-"] or [float("nan")])
                               for r in rows if r["part"] == "g2g" and r["tool"] == tool) for tool in tools}
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    cpu = {}
    for r in rows:
        if r["part"] == "simulcast":
            cpu.setdefault((r["tool"], r["destinations"]), []).append(float(r["cpu_s"]) / float(r["seconds"]) * 100)
    handler = {}
    for r in rows:
        if r["part"] == "simulcast" and r["tool"] == "ours":
            handler.setdefault(r["destinations"], []).append(float(r["handler_cpu_s"]) / float(r["seconds"]) * 100)
    c = lambda tool, n: med(cpu.get((tool, n), []))
    h = lambda n: med(handler.get(n, []))
    g = rows[0] if rows else {}
    runs = len([r for r in rows if r["part"] == "g2g" and r["tool"] == "ours"])
    sim_runs = len([r for r in rows if r["part"] == "simulcast" and r["tool"] == "ours" and r["destinations"] == "1"])
    load = os.environ.get("BENCH_LOAD_NOTE", "")
    section = f"""<!-- stream-g2g-begin -->
## The `stream` handler: glass-to-glass latency and simulcast CPU, against ffmpeg

Taken with `bash bench/stream.sh` on this machine (2 cores, no GPU){load}: a private Xvfb at {g.get("size", "?")}, 30 fps,
and a private PipeWire stack playing tones (broadcastd captures app and mic audio as users run it); release binaries
as `make` builds them; the `stream` handler at its defaults: over SRT it takes the packets of the encoder broadcastd
shares (`broadcast-encoder`: libx264 veryfast, zerolatency, crf 23 under 2667 kbit/s at 1280x720, keyframes every
2 s, app and mic in Opus tracks it mixes into one Opus track of 128 kbit/s); with `encode=own` it encodes by itself
(libx264 veryfast, zerolatency, 4500 kbit/s, the same audio); ffmpeg as `ffmpeg -f x11grab -framerate 30 -i :N -c:v libx264 -preset veryfast
-tune zerolatency -b:v 4500k -maxrate 4500k -bufsize 4500k -g 60 -bf 0 -f mpegts srt://…` (video only).

**Glass-to-glass** ({runs} runs of {g.get("seconds", "?")} s each, interleaved): `bench/flasher.py` turns the whole
X screen white for 0.2 s every 1.0-1.4 s (jittered against the capture clock) and notes CLOCK_MONOTONIC once the X
server has drawn it (XSync); an ffmpeg SRT listener on loopback decodes with low-delay flags to 64x36 gray frames
and stamps each on arrival with CLOCK_MONOTONIC; a flash's latency is the start of the next bright stretch decoded
after it minus the flash, each flash taking the next stretch in turn (so a flash's frames that arrive after the next
flash count for it; none within 2 s is a miss). Both senders and the receiver use the same SRT latency, `latency={g.get("latency_us", "?")}` µs
({int(g.get("latency_us", "0")) // 1000} ms), which is in every figure: libsrt holds each packet until its
timestamp plus that window.

| | broadcastd + `stream` handler | ffmpeg x11grab → libx264 → SRT | ratio |
|---|---|---|---|
| latency p50 | {med(lat["ours"]):.0f} ms | {med(lat["ffmpeg"]):.0f} ms | {med(lat["ours"]) / med(lat["ffmpeg"]):.2f}× (goal ≤ 1×) |
| latency p99 | {percentile(lat["ours"], 0.99):.0f} ms | {percentile(lat["ffmpeg"], 0.99):.0f} ms | {percentile(lat["ours"], 0.99) / percentile(lat["ffmpeg"], 0.99):.2f}× |
| median of each run | {per_run["ours"]} ms | {per_run["ffmpeg"]} ms | |
| flashes measured (missed) | {len(lat["ours"])} ({missed["ours"]}) | {len(lat["ffmpeg"])} ({missed["ffmpeg"]}) | |
| ours with `--set audio=none --set encode=own` (video only, every frame, as ffmpeg here), p50 (p99) | {med(lat["ours-noaudio"]):.0f} ms ({percentile(lat["ours-noaudio"], 0.99):.0f} ms) | | {med(lat["ours-noaudio"]) / med(lat["ffmpeg"]):.2f}× |
| ours with `--set encode=own` (the handler encoding by itself), p50 (p99) | {med(lat["ours-own"]):.0f} ms ({percentile(lat["ours-own"], 0.99):.0f} ms) | | the defaults (a shared encoder) {med(lat["ours"]) / med(lat["ours-own"]):.2f}× it (goal ≤ 1×) |

Where the time goes: the SRT latency window ({int(g.get("latency_us", "0")) // 1000} ms) is about half of it on both
sides; the rest is up to a frame interval (33 ms) until the next capture, the grab and conversion, the encode
(x264 zerolatency: no lookahead, no B-frames, sliced threads), the send, and the receiver's demux and decode to
64x36. Ours adds a hop (broadcastd → handler through the shared-memory frame pool) and audio; with `encode=shared`
the frames go to `broadcast-encoder` instead and its packets to the handler through a packet ring, a hop more.
ffmpeg's receiver shows a frame of MPEG-TS once more frames have begun to come (its demuxer ends a video packet at
the next unless the packet says its length, which ours do; its H.264 parser ends a frame at the next's start). On
this screen, black but for the flashes, a shared encoder encodes the frames that change (a flash on, its end 0.2 s
later), the three repeats after each change, and the keyframes by time; before it encoded those repeats, a flash's
frame waited for the next flash's, about 370 ms. A stream
encoding by itself sends every frame, 33 ms apart. In short runs before
this change ours with audio was 290-420 ms (without audio about 240 ms): the MPEG-TS muxer interleaved by time and
held each video packet until the audio of its moment was encoded, which the audio timeline places later than
frames arrive; over SRT the handler now writes packets as they come. The difference that remains between the two is
within the spread of the runs on this loaded machine (compare the medians of each run).

**Simulcast CPU** ({sim_runs} runs of {g.get("sim_seconds", "?")} s each, moving content on the screen):
the CPU of broadcastd and its handler together (the daemon's own time plus its reaped handler's), the handler
encoding by itself (`encode=own`, a departure from the defaults, so that the handler's CPU is the encode's), streaming to
one SRT listener, and to three at once (the URL and two in `also`: one encode); against one ffmpeg, and three
ffmpeg processes (each its own x11grab and encode, as three OBS-less streams would be), all to srt-live-transmit
listeners on loopback. % of one core, median.

| | 1 destination | 3 destinations | 3 vs 1 |
|---|---|---|---|
| broadcastd + handler | {c("ours", "1"):.1f} % | {c("ours", "3"):.1f} % | {c("ours", "3") / c("ours", "1"):.2f}× (goal ≤ 1.1×) |
| of which the handler | {h("1"):.1f} % | {h("3"):.1f} % | {h("3") / h("1"):.2f}× |
| ffmpeg (one process per destination) | {c("ffmpeg", "1"):.1f} % | {c("ffmpeg", "3"):.1f} % | {c("ffmpeg", "3") / c("ffmpeg", "1"):.2f}× |
| ours against ffmpeg | {c("ours", "1") / c("ffmpeg", "1"):.2f}× | {c("ours", "3") / c("ffmpeg", "3"):.2f}× (goal ≤ 0.4×) | |
<!-- stream-g2g-end -->
"""
    write_section(doc, "<!-- stream-g2g-begin -->", "<!-- stream-g2g-end -->", section)
    print(section)


def whip_frames(events, out):
    """The WHIP endpoint's decoded frames (its "frame" lines with --gray) as `receive` writes them: arrival, luma."""
    frames = []
    for line in open(events):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "frame":
            frames.append((event["arrival"], event["luma"]))
    json.dump({"frames": frames}, open(out, "w"))


def report_whip(results, doc):
    sys.path.insert(0, os.path.dirname(__file__))
    from docsection import write_section
    rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(results) if line.strip()]
    rows = [r for r in rows if r["part"] == "whip"]
    # The SRT arm encodes in the handler as WHIP's does (encode=own): its column is "ours".
    for r in rows:
        if r["tool"] == "ours-own":
            r["tool"] = "ours"
    lat = {tool: [float(x) for r in rows if r["tool"] == tool for x in r["latencies"].split(",") if x and x != "-"]
           for tool in ("whip", "ours")}
    missed = {tool: sum(int(r["missed"]) for r in rows if r["tool"] == tool) for tool in lat}
    def run_median(r):
        return statistics.median([float(x) for x in r["latencies"].split(",") if x and x != "-"] or [float("nan")])
    per_run = {tool: ", ".join("%.0f" % run_median(r) for r in rows if r["tool"] == tool) for tool in lat}
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    g = rows[0] if rows else {}
    runs = len([r for r in rows if r["tool"] == "whip"])
    # The handler's CPU over the whole broadcast (connecting included), % of one core; in its first settle_s seconds
    # (s of CPU); after them to its end (% of one core).
    def column(key, scale=lambda r, x: x):
        return {tool: [scale(r, float(r[key])) for r in rows if r["tool"] == tool and r.get(key, "-") != "-"]
                for tool in lat}
    cpu = column("handler_cpu_s", lambda r, x: 100 * x / float(r["seconds"]))
    first, live = column("handler_settle_cpu_s"), column("handler_live_cpu_pct")
    each = lambda xs, f="%.0f": ", ".join(f % x for x in xs)
    ratio = lambda c: med(c["whip"]) / med(c["ours"]) if c["whip"] and c["ours"] else float("nan")
    settle = g.get("settle_s", "?")
    extra = med(first["whip"]) - med(first["ours"])   # s of CPU the first seconds of WebRTC cost beyond SRT's
    load = os.environ.get("BENCH_LOAD_NOTE", "")
    ms = int(g.get("latency_us", "0")) // 1000
    # The command as run: its knobs where they differ from bench/stream_x11.sh's defaults.
    knobs = [f"BENCH_G2G_SECONDS={g['seconds']}" if g.get("seconds", "20") != "20" else "",
             f"BENCH_G2G_REPEATS={runs}" if runs != 2 else ""]
    command = " ".join(["BENCH_STREAM_PARTS=whip"] + [k for k in knobs if k] + ["bash bench/stream.sh"])
    section = f"""<!-- stream-whip-begin -->
## The `stream` handler over WebRTC (WHIP): glass-to-glass latency

Taken with `{command}` on this machine (2 cores, no GPU){load}:
the same private Xvfb at {g.get("size", "?")}, 30 fps, PipeWire tones and flashes as the SRT figures above; release
binaries; the `stream` handler at its defaults (for WHIP: H.264 constrained baseline, Opus). The receiver is
the tests' WHIP endpoint, `Tests/fixtures/whip_endpoint.py` on this machine (ICE over its own address, so
through lo): GStreamer's webrtcbin (libnice, DTLS-SRTP) answering
through python3-gi, decoding with openh264dec (Firefox's WebRTC decoder) to 64x36 gray, each frame stamped on
arrival with CLOCK_MONOTONIC; its jitter buffer holds nothing (`latency=0`: each packet on as it comes, in order),
where a browser's adapts to the network's jitter (a few ms on loopback). Beside it, interleaved run by run, ours over
SRT with `latency={ms} ms` to ffmpeg's SRT listener as above, with `encode=own`: the SRT stream encodes in its
handler as the WHIP stream does (by default it shares an encoder with other handlers, in a process of its own, whose
CPU would not be the handler's). {runs} runs of {g.get("seconds", "?")} s each.

| | WHIP (WebRTC) | SRT ({ms} ms latency window) |
|---|---|---|
| latency p50 | {med(lat["whip"]):.0f} ms (goal ≤ 150 ms) | {med(lat["ours"]):.0f} ms |
| latency p99 | {percentile(lat["whip"], 0.99):.0f} ms (goal ≤ 250 ms) | {percentile(lat["ours"], 0.99):.0f} ms |
| median of each run | {per_run["whip"]} ms | {per_run["ours"]} ms |
| flashes measured (missed) | {len(lat["whip"])} ({missed["whip"]}) | {len(lat["ours"])} ({missed["ours"]}) |
| handler CPU, whole broadcast, median (each run) | {med(cpu["whip"]):.1f} % ({each(cpu["whip"])}) | {med(cpu["ours"]):.1f} % ({each(cpu["ours"])}) |
| handler CPU in its first {settle} s, median (each run) | {med(first["whip"]):.2f} s ({each(first["whip"], "%.2f")}) | {med(first["ours"]):.2f} s ({each(first["ours"], "%.2f")}) |
| handler CPU from {settle} s to its end, median (each run) | {med(live["whip"]):.1f} % ({each(live["whip"])}) | {med(live["ours"]):.1f} % ({each(live["ours"])}) |

WebRTC has no fixed latency window: a packet is sent as it is encoded and decoded as it arrives, so what is left is
up to a frame interval until the next capture, the grab, the encode, the hop to the handler and the receiver's
decode. (webrtcbin 1.22 puts a clocksync of its own before each stream, which held every packet until its timestamp
on a timeline that the first packet of either stream set; the handler turns it off. With it on, the same runs gave a
p50 of 79 ms, p99 110 ms, and run medians of 24 to 92 ms, by which stream's packet came first.) The handler's CPU is utime+stime from /proc (of one core; its encoder threads included), polled every 0.1 s:
over each whole broadcast, connecting included, it is {ratio(cpu):.2f}× the SRT handler's (goal ≤ 1.1×);
from {settle} s after the handler started (connected and sending) to its end, finishing included, {ratio(live):.2f}×.
In its first seconds WebRTC costs more: beside the same encoder's start, GStreamer 1.22's DTLS elements make their
certificate, an RSA 2048 key generated once per handler process (0.1–0.7 s of CPU on this machine, at random: it is a
search for primes; GStreamer 1.28 makes an ECDSA P-256 one instead, and 1.22 lets no one choose), then ICE and DTLS
connect: {extra:.2f} s of CPU more than SRT's first {settle} s (medians), which is {100 * extra / 20:.1f} % of a core
over a 20 s broadcast, {100 * extra / float(g.get("seconds", "nan")):.1f} % over these runs, and fades away over a
broadcast of minutes. Once live, WebRTC costs the handler webrtcbin's RTP packetizing, RTCP, SRTP and libnice's sends
in GStreamer's own streaming threads (1–2 % of a core in per-thread figures of such runs), where SRT costs the MPEG-TS
muxing and libsrt's threads (under 1 %). The encode is most of either: the same x264 at 4.5 Mbit/s, constrained
baseline for WHIP, x264's own choice (High) for SRT, which on this content cost the same within the spread of runs.
Each figure moves by about ±10 % from run to run on a machine shared with other work.
<!-- stream-whip-end -->
"""
    write_section(doc, "<!-- stream-whip-begin -->", "<!-- stream-whip-end -->", section)
    print(section)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "receive":
        receive(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif cmd == "g2g":
        frames = json.load(open(sys.argv[2]))["frames"]
        found, missed = g2g(frames, json.load(open(sys.argv[3]))["flashes"])
        print(",".join("%.1f" % x for x in found) or "-", missed, len(frames))
    elif cmd == "report-g2g":
        report_g2g(sys.argv[2], sys.argv[3])
    elif cmd == "livestart":
        livestart(sys.argv[2], sys.argv[3])
    elif cmd == "watch":
        watch(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else None)
    elif cmd == "latencies":
        frames = json.load(open(sys.argv[2]))["frames"]
        print(",".join("%.1f" % x for x in latencies(frames, float(sys.argv[3]), 30)))
    elif cmd == "whip-frames":
        whip_frames(sys.argv[2], sys.argv[3])
    elif cmd == "report-whip":
        report_whip(sys.argv[2], sys.argv[3])
    elif cmd == "report":
        report(sys.argv[2], sys.argv[3])
