import BroadcastCore
import BroadcastProtocol
import CFFmpeg
import FoundationEssentials

extension StreamParameters {
    /// The parameters as an encoder shared by several handlers describes them (`EncodedStreamDescription`), index
    /// `stream`, shown upright after `orientation` (video).
    package func description(stream: Int, orientation: Orientation?) -> EncodedStreamDescription {
        var d = EncodedStreamDescription(
            stream: stream, kind: kind.rawValue, codec: String(cString: avcodec_get_name(AVCodecID(rawValue: codecID))),
            timeBase: [timeBase.numerator, timeBase.denominator])
        d.extradata = extradata.isEmpty ? nil : Data(extradata).base64EncodedString()
        d.profile = Int(profile)
        d.level = Int(level)
        d.bitRate = bitRate
        d.title = title
        if kind == .video {
            d.width = width
            d.height = height
            d.pixelFormat = av_get_pix_fmt_name(AVPixelFormat(rawValue: format)).map { String(cString: $0) }
            d.colorRange = av_color_range_name(AVColorRange(rawValue: colorRange)).map { String(cString: $0) }
            d.colorPrimaries = av_color_primaries_name(AVColorPrimaries(colorPrimaries)).map { String(cString: $0) }
            d.colorTransfer = av_color_transfer_name(AVColorTransferCharacteristic(colorTransfer)).map {
                String(cString: $0)
            }
            d.colorSpace = av_color_space_name(AVColorSpace(colorSpace)).map { String(cString: $0) }
            d.chromaLocation = av_chroma_location_name(AVChromaLocation(chromaLocation)).map { String(cString: $0) }
            d.frameRate = frameRate.map { [$0.numerator, $0.denominator] }
            d.rotation = orientation.map { Int($0.degrees) }
            d.mirrored = orientation?.mirrored
        } else {
            d.sampleFormat = av_get_sample_fmt_name(AVSampleFormat(rawValue: format)).map { String(cString: $0) }
            d.sampleRate = sampleRate
            d.channels = channels
            d.channelMask = channelMask
            d.frameSize = frameSize > 0 ? frameSize : nil
            d.priming = priming
            d.seekPreroll = Int(seekPreroll)
        }
        return d
    }

    /// The parameters a shared encoder described; throws when the description names what this libavcodec does not
    /// know or has numbers out of range.
    package init(_ d: EncodedStreamDescription) throws(MediaError) {
        if let problem = d.problem { throw MediaError("take a shared stream", problem) }
        guard let codec = avcodec_descriptor_get_by_name(d.codec) else {
            throw MediaError("take a shared stream", "codec \(d.codec) is not one libavcodec knows")
        }
        /// The value libavutil gives `name` (nil: none given).
        func value(_ name: String?, _ lookup: (String) -> Int32) throws(MediaError) -> Int32? {
            guard let name else { return nil }
            let value = lookup(name)
            guard value >= 0 else { throw MediaError("take a shared stream", "\(name) is not a name libavutil knows") }
            return value
        }
        let kind: MediaKind = d.kind == "video" ? .video : .audio
        self.init(kind: kind, codecID: codec.pointee.id.rawValue, timeBase: TimeBase(d.timeBase[0], d.timeBase[1]))
        extradata = d.extradataBytes
        guard extradata.count <= EncodedStreamDescription.maxExtradata else {
            throw MediaError("take a shared stream", "extradata is larger than its limit")
        }
        profile = Int32(clamping: d.profile ?? 0)
        level = Int32(clamping: d.level ?? 0)
        bitRate = d.bitRate ?? 0
        title = d.title
        if kind == .video {
            width = d.width ?? 0
            height = d.height ?? 0
            format = try value(d.pixelFormat) { av_get_pix_fmt($0).rawValue } ?? -1
            colorRange = UInt32(try value(d.colorRange) { av_color_range_from_name($0) } ?? 0)
            colorPrimaries = UInt32(try value(d.colorPrimaries) { av_color_primaries_from_name($0) } ?? 2)
            colorTransfer = UInt32(try value(d.colorTransfer) { av_color_transfer_from_name($0) } ?? 2)
            colorSpace = UInt32(try value(d.colorSpace) { av_color_space_from_name($0) } ?? 2)
            chromaLocation = UInt32(try value(d.chromaLocation) { av_chroma_location_from_name($0) } ?? 0)
            if let rate = d.frameRate, rate.count == 2, rate[0] > 0, rate[1] > 0 {
                frameRate = TimeBase(rate[0], rate[1])
            }
        } else {
            format = try value(d.sampleFormat) { av_get_sample_fmt($0).rawValue } ?? -1
            sampleRate = d.sampleRate ?? 0
            channels = d.channels ?? 0
            channelMask = d.channelMask ?? 0
            frameSize = d.frameSize ?? 0
            priming = max(0, min(d.priming ?? 0, Int64(sampleRate)))
            seekPreroll = Int32(clamping: max(0, min(d.seekPreroll ?? 0, sampleRate)))
        }
    }
}

extension EncodedStreamDescription {
    /// How the picture is shown upright (video); `.up` when it does not say or says what cannot be.
    package var orientation: Orientation {
        guard let rotation, [0, 90, 180, 270].contains(rotation) else { return .up }
        return Orientation(degrees: UInt16(rotation), mirrored: mirrored ?? false)
    }
}
