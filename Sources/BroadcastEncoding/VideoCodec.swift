import BroadcastCore
import CFFmpeg

/// The video codecs broadcastd encodes, each through one of Debian's libavcodec encoders.
public enum VideoCodec: String, CaseIterable, Sendable {
    case h264
    case hevc
    case av1

    public var displayName: String {
        switch self {
        case .h264: "H.264"
        case .hevc: "HEVC"
        case .av1: "AV1"
        }
    }

    /// Constant quality when no bit rate is given: each encoder's own default, about the same picture.
    public var defaultCRF: Int {
        switch self {
        case .h264: 23
        case .hevc: 28
        case .av1: 35
        }
    }

    public var crfRange: ClosedRange<Int> { self == .av1 ? 0...63 : 0...51 }

    /// The preset when none is given: the fastest that keeps a 1080p30 screen live on two cores with the rest of a
    /// broadcast beside it (docs/benchmarks.md, "Recording codecs"): x264's `veryfast`; x265's `ultrafast` and
    /// SVT-AV1's 12 (`ultrafast`), whose `veryfast` took a core and more and lost 13-16 % of the frames.
    public var defaultPreset: String { self == .h264 ? "veryfast" : "ultrafast" }

    /// The tunes this codec's encoders take (`none`: the encoder's own default).
    public var tunes: [String] {
        switch self {
        case .h264: ["none", "zerolatency", "film", "animation", "grain", "stillimage", "psnr", "ssim", "fastdecode"]
        case .hevc: ["none", "zerolatency", "animation", "grain", "psnr", "ssim", "fastdecode"]
        case .av1: ["none", "zerolatency", "psnr"]
        }
    }

    /// The presets every codec takes, named as x264 names them, fastest first.
    public static let presets = [
        "ultrafast", "superfast", "veryfast", "faster", "fast", "medium",
        "slow", "slower", "veryslow",
    ]
}

/// One encoder a `VideoCodec` can be made with, and how broadcastd's settings translate into its options.
///
/// This is the place for hardware encoders: a VAAPI case (`h264_vaapi`, `hevc_vaapi`, `av1_vaapi`) goes
/// into `candidates(for:)` ahead of the software ones, with its own `options` (VAAPI takes `qp`, not
/// `crf`, and its own `quality` for the preset), a `pixelFormat` of `AV_PIX_FMT_VAAPI`, and a frames
/// context (`av_hwdevice_ctx_create`, `av_hwframe_ctx_init`) that `VideoInput` uploads each frame into
/// (`av_hwframe_transfer_data`) instead of borrowing it. Nothing else in the handlers needs to change.
public enum VideoEncoderImplementation: String, CaseIterable, Sendable {
    case libx264
    case libx265
    case libsvtav1
    /// AV1 where this FFmpeg was built without SVT-AV1.
    case libaom = "libaom-av1"

    public var codec: VideoCodec {
        switch self {
        case .libx264: .h264
        case .libx265: .hevc
        case .libsvtav1, .libaom: .av1
        }
    }

    /// The FFmpeg encoder name.
    public var encoderName: String { rawValue }

    /// In order of preference.
    public static func candidates(for codec: VideoCodec) -> [VideoEncoderImplementation] {
        allCases.filter { $0.codec == codec }
    }

    /// The first candidate this FFmpeg has, or an error naming what to install.
    public static func best(for codec: VideoCodec) throws(MediaError) -> VideoEncoderImplementation {
        let candidates = candidates(for: codec)
        guard let found = candidates.first(where: { avcodec_find_encoder_by_name($0.encoderName) != nil }) else {
            let names = candidates.map(\.encoderName).joined(separator: " or ")
            throw MediaError(
                "open the \(codec.displayName) encoder",
                "this FFmpeg has no \(names) encoder (Debian's libavcodec59 is built with them)")
        }
        return found
    }

    /// The pixel layouts the encoder takes as they come; others are converted (`VideoInput`).
    public var takes: [PixelFormat] { self == .libx264 ? [.nv12, .i420] : [.i420] }

    /// The layout to feed it captured frames of `captured` in.
    public func inputFormat(for captured: PixelFormat) -> PixelFormat { takes.contains(captured) ? captured : .i420 }

    /// Whether the encoder makes a frame marked as a keyframe (`pict_type` I) an IDR, decodable on its own: libx264
    /// does; libx265 with `forced-idr`, SVT-AV1 with `enable-force-key-frames` (`options`), which SVT-AV1 1.4 refuses
    /// in its low-delay prediction (tune zerolatency: it ignores the mark without it); libaom does.
    public func forcesKeyframes(_ settings: VideoEncoderSettings) -> Bool {
        !(self == .libsvtav1 && Self.tune(settings) == "zerolatency")
    }

    private static func tune(_ settings: VideoEncoderSettings) -> String? {
        settings.tune.flatMap { $0.isEmpty || $0 == "none" ? nil : $0 }
    }

    /// Whether a running encoder follows a new `bit_rate` (libx264 reconfigures itself; the others keep their first).
    public var changesBitRateWhileRunning: Bool { self == .libx264 }

    /// SVT-AV1's preset (0 slowest to 13 fastest) for an x264 preset name, spread over SVT's range as x264's
    /// names spread over x264's: `veryfast` is 10, the fast end of SVT's real-time presets (8-13) short of the
    /// two that trade most quality. What each costs on a 1080p screen is in docs/benchmarks.md.
    static let svtPresets = [
        "ultrafast": 12, "superfast": 11, "veryfast": 10, "faster": 9, "fast": 8,
        "medium": 7, "slow": 5, "slower": 4, "veryslow": 2,
    ]
    /// libaom's cpu-used (0 slowest to 8 fastest) for an x264 preset name.
    static let aomSpeeds = [
        "ultrafast": 8, "superfast": 8, "veryfast": 8, "faster": 7, "fast": 6,
        "medium": 5, "slow": 4, "slower": 3, "veryslow": 2,
    ]

    /// The encoder's private options for `settings` (the preset, the tune, constant quality).
    public func options(_ settings: VideoEncoderSettings) -> [String: String] {
        let tune = Self.tune(settings)
        var options: [String: String] = [:]
        switch self {
        case .libx264, .libx265:
            options["preset"] = settings.preset
            if let tune { options["tune"] = tune }
            if settings.bitRate == nil { options["crf"] = String(settings.crf) }
            if self == .libx264, let profile = settings.profile { options["profile"] = profile }
            // x265 says what it does on stderr unless told otherwise; a forced keyframe is an IDR, not an open-GOP I.
            if self == .libx265 {
                options["x265-params"] = "log-level=error"
                options["forced-idr"] = "1"
            }
        case .libsvtav1:
            options["preset"] = String(Self.svtPresets[settings.preset] ?? 10)
            if settings.bitRate == nil { options["crf"] = String(settings.crf) }
            var params: [String] = []
            // Low delay: each frame predicted from earlier ones only, none held back for later.
            // Otherwise frames marked as keyframes are made ones (SVT-AV1 1.4 takes that in random access only).
            params.append(tune == "zerolatency" ? "pred-struct=1" : "enable-force-key-frames=1")
            params.append("tune=\(tune == "psnr" ? 1 : 0)")
            options["svtav1-params"] = params.joined(separator: ":")
        case .libaom:
            options["cpu-used"] = String(Self.aomSpeeds[settings.preset] ?? 8)
            options["row-mt"] = "1"
            if tune == "zerolatency" {
                options["usage"] = "realtime"
                options["lag-in-frames"] = "0"
            }
            if tune == "psnr" { options["tune"] = "psnr" }
            if settings.bitRate == nil { options["crf"] = String(settings.crf) }
        }
        return options
    }
}
