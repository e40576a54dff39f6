// A PipeWire video source for the tests: what a compositor's screen cast sends, with the buffer
// metadata gst's pipewiresink does not write. BGRx frames of --size at --fps; with --crop X,Y,WxH only
// that region is the picture (the rest of the buffer is red, and each buffer's crop region says so);
// inside the picture, the base colour --color with a band of --band rows halfway down that alternates
// between green and white every frame. With --damage each buffer's damage names only that band.
// With --cursor, cursor metadata as mutter writes it, and every other buffer carries only that (size 0,
// its pixels magenta, no crop region): the pointer's hotspot moves along the row 50 rows down the picture
// (x 40 to 99 in picture coordinates, a pixel a buffer); its image is a 16x16 opaque yellow square with
// hotspot (2, 3) for 60 buffers, then a 24x24 half-transparent blue one with hotspot (12, 12) for 60, and so
// on, sent again every 5 buffers; the last 6 buffers of every 60 say the pointer is not over the stream.
// With --hold S, no buffer for S seconds each time the stream starts streaming (a consumer connects), as a
// compositor before its first frame. Each buffer's header carries its capture time (CLOCK_MONOTONIC), --latency MS
// before it is queued, as xdg-desktop-portal-wlr stamps the compositor's frame time before copying it; buffers
// are offered as it offers them (two by default, up to 32). With --role ROLE (Camera) and --description TEXT the node
// says them (media.role, node.description), as a camera's node does. With --format YUY2, UYVY, NV12 or I420 the
// frames are of that Y'CbCr format (a webcam's, BT.601 limited range; the planes of NV12 and I420 one after the
// other, chroma rows as long as the luma's and half as long), the base colour and the band only (no --crop or
// --cursor). From SIGUSR1 to SIGUSR2 the picture is white (a flash a test makes in step with another).
//   pipewire-test-video-source --name NODE [--size 320x180] [--fps 30] [--color RRGGBB] [--crop X,Y,WxH] [--band N] [--damage]
//                              [--cursor] [--hold S] [--latency MS] [--role ROLE] [--description TEXT]
//                              [--format BGRx|YUY2|UYVY|NV12|I420]
import CPipeWire
import Glibc

/// 1 from SIGUSR1 to SIGUSR2: the picture (band included) is white meanwhile, a flash a test makes in step with
/// another (the X screen's), its frames stamped as the others are.
nonisolated(unsafe) var flashing: sig_atomic_t = 0

func fail(_ message: String, status: Int32 = 1) -> Never {
    let line = "pipewire-test-video-source: \(message)\n"
    _ = write(2, line, line.utf8.count)
    exit(status)
}

struct Options {
    var name = "test-video-source"
    var width: Int32 = 320, height: Int32 = 180
    var fps: UInt32 = 30
    var color: UInt32 = 0x3060d0
    var crop: spa_region?
    var band: Int32 = 16
    var damage = false
    var cursor = false
    var hold = 0.0
    var latency = 0.0
    var role: String?
    var description: String?
    var format = "BGRx"
    var yCbCr: Bool { format != "BGRx" }

    init(_ arguments: [String]) {
        var it = arguments.makeIterator()
        func numbers(_ text: String?) -> [Int32] {
            (text ?? "").split(whereSeparator: { $0 == "x" || $0 == "," }).compactMap { Int32($0) }
        }
        while let argument = it.next() {
            switch argument {
            case "--name": name = it.next() ?? name
            case "--size":
                let n = numbers(it.next())
                (width, height) = (n[0], n[1])
            case "--fps": fps = UInt32(it.next() ?? "") ?? fps
            case "--color": color = UInt32(it.next() ?? "", radix: 16) ?? color
            case "--crop":
                let n = numbers(it.next())
                crop = spa_region(
                    position: spa_point(x: n[0], y: n[1]),
                    size: spa_rectangle(width: UInt32(n[2]), height: UInt32(n[3])))
            case "--band": band = Int32(it.next() ?? "") ?? band
            case "--damage": damage = true
            case "--cursor": cursor = true
            case "--hold": hold = Double(it.next() ?? "") ?? hold
            case "--latency": latency = Double(it.next() ?? "") ?? latency
            case "--role": role = it.next()
            case "--description": description = it.next()
            case "--format":
                format = it.next() ?? ""
                if !["BGRx", "YUY2", "UYVY", "NV12", "I420"].contains(format) {
                    fail("--format takes BGRx, YUY2, UYVY, NV12 or I420", status: 64)
                }
            default:
                fail("unknown argument \(argument)", status: 64)
            }
        }
        if yCbCr && (crop != nil || cursor || width % 2 != 0 || height % 2 != 0) {
            fail("--format \(format) takes an even size, without --crop or --cursor", status: 64)
        }
    }

    /// Bytes per row (of the luma plane).
    var stride: Int32 { width * (["NV12", "I420"].contains(format) ? 1 : yCbCr ? 2 : 4) }
    /// Bytes a frame.
    var frameBytes: Int32 { stride * height * (["NV12", "I420"].contains(format) ? 3 : 2) / 2 }
    var spaFormat: spa_video_format {
        switch format {
        case "YUY2": SPA_VIDEO_FORMAT_YUY2
        case "UYVY": SPA_VIDEO_FORMAT_UYVY
        case "NV12": SPA_VIDEO_FORMAT_NV12
        case "I420": SPA_VIDEO_FORMAT_I420
        default: SPA_VIDEO_FORMAT_BGRx
        }
    }
}

/// `rgb` in Y'CbCr, BT.601 limited range.
func yCbCr(_ rgb: UInt32) -> (y: UInt8, u: UInt8, v: UInt8) {
    let (r, g, b) = (Int(rgb >> 16 & 0xff), Int(rgb >> 8 & 0xff), Int(rgb & 0xff))
    return (
        UInt8(((66 * r + 129 * g + 25 * b + 128) >> 8) + 16), UInt8(((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128),
        UInt8(((112 * r - 94 * g - 18 * b + 128) >> 8) + 128)
    )
}

final class Source {
    let options: Options
    let loop: OpaquePointer
    var stream: OpaquePointer?
    var events = pw_stream_events()
    var listener = spa_hook()
    var frame: UInt64 = 0
    var streaming = false
    /// When the stream last started streaming (CLOCK_MONOTONIC seconds).
    var streamingSince = 0.0
    /// The pointer's two images, premultiplied RGBA (in memory order R, G, B, A).
    let sprites: [(size: UInt32, hotspot: (x: Int32, y: Int32), pixels: [UInt32])] = [
        (16, (2, 3), Array(repeating: UInt32(littleEndian: 0xff00_d0ff), count: 16 * 16)),
        (24, (12, 12), Array(repeating: UInt32(littleEndian: 0x8080_0000), count: 24 * 24)),
    ]

    init(_ options: Options) {
        self.options = options
        pw_init(nil, nil)
        loop = pw_main_loop_new(nil)
    }

    func run() -> Int32 {
        let context = pw_context_new(pw_main_loop_get_loop(loop), nil, 0)
        guard let core = pw_context_connect(context, nil, 0) else {
            fail("cannot connect to PipeWire")
        }
        let properties = bd_pw_properties_new()
        pw_properties_set(properties, PW_KEY_MEDIA_CLASS, "Video/Source")
        pw_properties_set(properties, PW_KEY_NODE_NAME, options.name)
        if let role = options.role { pw_properties_set(properties, PW_KEY_MEDIA_ROLE, role) }
        if let description = options.description { pw_properties_set(properties, PW_KEY_NODE_DESCRIPTION, description) }
        stream = pw_stream_new(core, options.name, properties)
        events.version = bd_pw_version_stream_events()
        events.param_changed = { data, id, param in
            let me = Unmanaged<Source>.fromOpaque(data!).takeUnretainedValue()
            guard id == SPA_PARAM_Format.rawValue, param != nil, let stream = me.stream else { return }
            bd_pw_stream_offer_video_buffers(stream, me.options.stride, me.options.frameBytes, me.options.cursor)
        }
        events.state_changed = { data, _, state, _ in
            let me = Unmanaged<Source>.fromOpaque(data!).takeUnretainedValue()
            if state == PW_STREAM_STATE_STREAMING && !me.streaming { me.streamingSince = Source.now() }
            me.streaming = state == PW_STREAM_STATE_STREAMING
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        pw_stream_add_listener(stream, &listener, &events, me)
        guard
            bd_pw_stream_connect_video_source(
                stream, UInt32(options.width), UInt32(options.height), options.fps, options.spaFormat.rawValue)
                >= 0
        else {
            fail("cannot connect the stream")
        }
        _ = bd_pw_loop_add_periodic_timer(
            pw_main_loop_get_loop(loop),
            { data, _ in
                Unmanaged<Source>.fromOpaque(data!).takeUnretainedValue().produce()
            }, me, 1_000_000_000 / UInt64(options.fps))
        pw_main_loop_run(loop)
        return 0
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    func produce() {
        guard streaming, Source.now() - streamingSince >= options.hold, let stream,
            let buffer = pw_stream_dequeue_buffer(stream)
        else { return }
        defer { pw_stream_queue_buffer(stream, buffer) }
        guard let spaBuffer = buffer.pointee.buffer, let data = spaBuffer.pointee.datas, let base = data.pointee.data
        else { return }
        bd_pw_buffer_set_header(spaBuffer, Int64((Source.now() - options.latency / 1000) * 1e9), frame)
        let (width, height, stride) = (Int(options.width), Int(options.height), Int(options.stride))
        let crop =
            options.crop
            ?? spa_region(
                position: spa_point(x: 0, y: 0), size: spa_rectangle(width: UInt32(width), height: UInt32(height)))
        let (cx, cy, cw, ch) = (Int(crop.position.x), Int(crop.position.y), Int(crop.size.width), Int(crop.size.height))
        let bandTop = cy + ch / 2 - Int(options.band) / 2
        let white = flashing != 0
        let bandColor: UInt32 = white || frame % 2 != 0 ? 0xffffff : 0x20c040
        let baseColor = white ? 0xffffff : options.color
        let pixels = base.assumingMemoryBound(to: UInt32.self)
        if options.cursor {
            let n = Int(frame % 60)
            let sprite = sprites[Int(frame / 60 % 2)]
            sprite.pixels.withUnsafeBufferPointer { image in
                bd_pw_buffer_set_cursor(
                    spaBuffer, n < 54, Int32(cx + 40 + n), Int32(cy + 50), n % 5 == 0 ? image.baseAddress : nil,
                    sprite.size, sprite.size, sprite.hotspot.x, sprite.hotspot.y)
            }
            if frame % 2 == 1 {
                pixels.update(repeating: 0xffff_00ff, count: width * height)
                bd_pw_buffer_set_video_meta(spaBuffer, spa_region(), nil, 0)
                data.pointee.chunk.pointee.size = 0
                frame += 1
                return
            }
        }
        for y in 0..<height where options.yCbCr {
            let color = yCbCr(y >= bandTop && y < bandTop + Int(options.band) ? bandColor : baseColor)
            fill(row: y, with: color, in: base.assumingMemoryBound(to: UInt8.self))
        }
        for y in 0..<height where !options.yCbCr {
            let row = pixels + y * width
            let inside = y >= cy && y < cy + ch
            let color =
                !inside ? 0xff0000 : (y >= bandTop && y < bandTop + Int(options.band) ? bandColor : baseColor)
            if !inside {
                row.update(repeating: 0xff00_0000 | 0xff0000, count: width)
            } else {
                row.update(repeating: 0xff00_0000 | 0xff0000, count: cx)
                (row + cx).update(repeating: 0xff00_0000 | color, count: cw)
                (row + cx + cw).update(repeating: 0xff00_0000 | 0xff0000, count: width - cx - cw)
            }
        }
        var damage = spa_region(
            position: spa_point(x: Int32(cx), y: Int32(bandTop)),
            size: spa_rectangle(width: UInt32(cw), height: UInt32(options.band)))
        bd_pw_buffer_set_video_meta(
            spaBuffer, options.crop ?? spa_region(), &damage, options.damage && frame > 0 ? 1 : 0)
        data.pointee.chunk.pointee.offset = 0
        data.pointee.chunk.pointee.size = UInt32(options.frameBytes)
        data.pointee.chunk.pointee.stride = Int32(stride)
        frame += 1
    }

    /// Row `y` of a Y'CbCr frame at `base` in `color` (the chroma of an even row for its pair of rows).
    func fill(row y: Int, with color: (y: UInt8, u: UInt8, v: UInt8), in base: UnsafeMutablePointer<UInt8>) {
        let (width, height, stride) = (Int(options.width), Int(options.height), Int(options.stride))
        let row = base + y * stride
        switch options.format {
        case "YUY2", "UYVY":
            let (y, u, v) = (UInt32(color.y), UInt32(color.u), UInt32(color.v))
            let pair = options.format == "YUY2" ? y | u << 8 | y << 16 | v << 24 : u | y << 8 | v << 16 | y << 24
            UnsafeMutableRawPointer(row).bindMemory(to: UInt32.self, capacity: width / 2)
                .update(repeating: UInt32(littleEndian: pair), count: width / 2)
        default:
            row.update(repeating: color.y, count: width)
            guard y % 2 == 0 else { return }
            let chroma = base + stride * height
            if options.format == "NV12" {
                let uv = chroma + y / 2 * stride
                UnsafeMutableRawPointer(uv).bindMemory(to: UInt16.self, capacity: width / 2)
                    .update(repeating: UInt16(littleEndian: UInt16(color.u) | UInt16(color.v) << 8), count: width / 2)
            } else {
                (chroma + y / 2 * stride / 2).update(repeating: color.u, count: width / 2)
                (chroma + stride * height / 4 + y / 2 * stride / 2).update(repeating: color.v, count: width / 2)
            }
        }
    }
}

signal(SIGUSR1) { _ in flashing = 1 }
signal(SIGUSR2) { _ in flashing = 0 }
// Taken even when the parent blocked them (a test runner's mask is inherited).
var flashSignals = sigset_t()
sigemptyset(&flashSignals)
sigaddset(&flashSignals, SIGUSR1)
sigaddset(&flashSignals, SIGUSR2)
pthread_sigmask(SIG_UNBLOCK, &flashSignals, nil)
exit(Source(Options(Array(CommandLine.arguments.dropFirst()))).run())
