// A beep player for the tests: into the default sink, float32 stereo at 48 kHz, silence with a beep (1 kHz,
// amplitude 0.5, --beep-ms long) at the start of every second of its own samples, so the beeps are exactly a
// second apart in the sink's clock; its node asks for a latency of --latency samples (the graph's quantum).
// For each beep it prints, as PipeWire's timing says, when the sink plays its first sample, on
// CLOCK_MONOTONIC, a line "beep N NANOSECONDS", once the buffer holding it is written (a cycle ahead);
// and "quantum FRAMES NANOSECONDS" whenever the number of frames a cycle asks for changes (from that cycle's
// start on), and "glitch NANOSECONDS"
// for a cycle that did not start where the last one ended (a quantum change, or an xrun on a loaded machine): a beep
// near one may not be played when it says; "xrun NANOSECONDS LOST" when cycles never came (the graph's clock and its
// time both moved on by LOST ns more than the last cycle's length). With --tone HZ it plays a steady sine of HZ
// (amplitude 1/8) instead of beeps, made in each cycle for what the cycle asks (it never runs dry when the quantum
// changes, as a player that buffers ahead does); --target NODE plays into that node instead of the default sink. With
// --source NAME it is
// no player but a source named NAME (a microphone, as PipeWire sees it), and says when each beep was heard as a
// device's would be: the buffer handed on in a cycle holds what was heard during the cycle's length before it.
//   pipewire-test-beeps [--latency 1024] [--beep-ms 40] [--first-ms 500] [--tone HZ] [--target NODE | --source NAME]
import CPipeWire
import Glibc

func say(_ line: String) {
    let text = line + "\n"
    _ = write(1, text, text.utf8.count)
}

final class Player {
    let rate = 48_000
    var latency = 1024, beepFrames = 1920, firstFrame = 24_000, tone = 0
    var target: String?
    var source: String?
    let loop: OpaquePointer
    var stream: OpaquePointer?
    var events = pw_stream_events()
    var listener = spa_hook()
    /// Frames written so far.
    var written = 0
    var quantum = 0
    /// The last cycle's start and length, ns, and the graph's clock then.
    var lastCycle: (start: Int64, length: Int64, ticks: UInt64)?

    init(_ arguments: [String]) {
        var it = arguments.makeIterator()
        while let argument = it.next() {
            let text = it.next() ?? ""
            let value = Int(text) ?? -1
            switch argument {
            case "--target" where !text.isEmpty: target = text
            case "--source" where !text.isEmpty: source = text
            case "--tone" where value > 0: tone = value
            case "--latency" where value > 0: latency = value
            case "--beep-ms" where value > 0: beepFrames = value * rate / 1000
            case "--first-ms" where value >= 0: firstFrame = value * rate / 1000
            default:
                say("pipewire-test-beeps: bad argument \(argument)")
                exit(64)
            }
        }
        pw_init(nil, nil)
        loop = pw_main_loop_new(nil)
    }

    func run() -> Int32 {
        let settings = bd_pw_properties_new()
        pw_properties_set(settings, PW_KEY_CONFIG_NAME, "client-rt.conf")
        let context = pw_context_new(pw_main_loop_get_loop(loop), settings, 0)
        guard let core = pw_context_connect(context, nil, 0) else {
            say("pipewire-test-beeps: cannot connect to PipeWire")
            return 1
        }
        let properties = bd_pw_properties_new()
        pw_properties_set(properties, PW_KEY_MEDIA_TYPE, "Audio")
        pw_properties_set(properties, PW_KEY_MEDIA_CATEGORY, "Playback")
        pw_properties_set(properties, PW_KEY_NODE_NAME, source ?? "test-beeps")
        pw_properties_set(properties, PW_KEY_APP_NAME, source ?? "test-beeps")
        if source != nil { pw_properties_set(properties, PW_KEY_MEDIA_CLASS, "Audio/Source") }
        pw_properties_set(properties, PW_KEY_NODE_LATENCY, "\(latency)/\(rate)")
        if let target { pw_properties_set(properties, "target.object", target) }
        stream = pw_stream_new(core, "test-beeps", properties)
        events.version = bd_pw_version_stream_events()
        events.process = { data in Unmanaged<Player>.fromOpaque(data!).takeUnretainedValue().process() }
        pw_stream_add_listener(stream, &listener, &events, Unmanaged.passUnretained(self).toOpaque())
        guard bd_pw_stream_connect_audio_playback(stream, UInt32(rate)) >= 0 else {
            say("pipewire-test-beeps: cannot connect the stream")
            return 1
        }
        pw_main_loop_run(loop)
        return 0
    }

    /// The sample at frame `n` of the player's own timeline (left and right alike).
    func sample(_ n: Int) -> Float {
        if tone > 0 { return Float(0.125 * sin(2 * Double.pi * Double(tone) * Double(n % rate) / Double(rate))) }
        guard n >= firstFrame else { return 0 }
        let inBeep = (n - firstFrame) % rate
        guard inBeep < beepFrames else { return 0 }
        return Float(0.5 * sin(2 * Double.pi * 1000 * Double(inBeep) / Double(rate)))
    }

    func process() {
        guard let stream, let buffer = pw_stream_dequeue_buffer(stream) else { return }
        guard let spaBuffer = buffer.pointee.buffer, let data = spaBuffer.pointee.datas,
            let base = data.pointee.data
        else {
            pw_stream_queue_buffer(stream, buffer)
            return
        }
        let capacity = Int(data.pointee.maxsize) / 8
        let frames = min(capacity, buffer.pointee.requested > 0 ? Int(buffer.pointee.requested) : capacity)
        let out = base.assumingMemoryBound(to: Float.self)
        for i in 0..<frames {
            let v = sample(written + i)
            out[2 * i] = v
            out[2 * i + 1] = v
        }
        data.pointee.chunk.pointee.offset = 0
        data.pointee.chunk.pointee.stride = 8
        data.pointee.chunk.pointee.size = UInt32(frames * 8)
        var time = pw_time()
        pw_stream_get_time_n(stream, &time, MemoryLayout<pw_time>.size)
        pw_stream_queue_buffer(stream, buffer)
        if frames != quantum {
            quantum = frames
            say("quantum \(frames) \(time.now)")
        }
        let length = Int64(frames) * 1_000_000_000 / Int64(rate)
        if let last = lastCycle, abs(time.now - last.start - last.length) > 1_000_000 {
            say("glitch \(time.now)")
            // The clock at the graph's rate (48 kHz here) moved on by the same as the time: cycles never came.
            let clock = (Int64(time.ticks) - Int64(last.ticks)) * 1_000_000_000 / Int64(rate) - last.length
            let moved = time.now - last.start - last.length
            if clock > last.length / 2 && abs(clock - moved) < last.length / 2 { say("xrun \(time.now) \(moved)") }
        }
        lastCycle = (time.now, length, time.ticks)
        // The buffer filled in a cycle is played in the next: its first sample a cycle (this buffer's length)
        // after this one's start, after what the stream and the graph still hold (queued and buffered frames),
        // and the delay to the device.
        var delay: Int64 = 0
        if time.rate.denom > 0 { delay = time.delay * 1_000_000_000 * Int64(time.rate.num) / Int64(time.rate.denom) }
        let ahead = Int64(time.queued / 8 + time.buffered + UInt64(frames)) * 1_000_000_000 / Int64(rate)
        let firstPlayed = source == nil ? time.now + delay + ahead : time.now - delay - length
        var beep = written < firstFrame ? firstFrame : firstFrame + ((written - firstFrame + rate - 1) / rate) * rate
        while beep < written + frames {
            let at = firstPlayed + Int64(beep - written) * 1_000_000_000 / Int64(rate)
            say("beep \((beep - firstFrame) / rate) \(at)")
            beep += rate
        }
        written += frames
    }
}

exit(Player(Array(CommandLine.arguments.dropFirst())).run())
