import BroadcastCapture
import BroadcastCore
import Foundation
import Testing

/// The luma plane of the synthetic pattern's frame `index` at `width`x`height`, as the source draws it.
func syntheticLuma(_ index: Int, width: Int, height: Int) throws -> [UInt8] {
    let source = SyntheticSource(.init(video: VideoFormat(width: width, height: height)))
    var frame = [UInt8](repeating: 0, count: source.videoFormat.frameByteCount)
    _ = try frame.withUnsafeMutableBytes {
        try source.captureFrame(index: UInt64(index), deadline: 0, into: $0.baseAddress!, previous: nil)
    }
    return Array(frame.prefix(width * height))
}

/// PSNR of two luma planes, dB.
func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
    let mse = zip(a, b).reduce(0.0) { $0 + pow(Double($1.0) - Double($1.1), 2) } / Double(a.count)
    return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
}

/// The synthetic pattern's frame a file's first frame shows (0 to 30): a recording starts at the first frame its
/// encoder had, a few frames into the capture when it shares an encoder that started for it.
func firstPattern(of frames: [[UInt8]], width: Int, height: Int) throws -> Int {
    let first = try #require(frames.first, "no frame decoded")
    let scores = try (0...30).map { psnr(first, try syntheticLuma($0, width: width, height: height)) }
    return scores.indices.max { scores[$0] < scores[$1] }!
}
