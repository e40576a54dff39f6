import BroadcastCore
import Testing

@testable import BroadcastCapture

@Suite struct FrameConverterTests {
    static let sentinel: UInt8 = 0xA5
    /// The eight colour bars, as B, G, R.
    static let bars: [(b: UInt8, g: UInt8, r: UInt8)] = [
        (255, 255, 255), (0, 255, 255), (255, 255, 0), (0, 255, 0), (255, 0, 255), (0, 0, 255), (255, 0, 0), (0, 0, 0),
    ]

    /// BGRx pixels of a frame, with rows `stride` bytes apart and starting `misalign` bytes into the buffer.
    struct Source {
        var bytes: [UInt8]
        let width: Int, height: Int, stride: Int, misalign: Int

        init(width: Int, height: Int, padding: Int = 0, misalign: Int = 0, seed: UInt64 = 1) {
            self.width = width
            self.height = height
            stride = width * 4 + padding
            self.misalign = misalign
            var state = seed
            bytes = (0..<(misalign + stride * height)).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 56)
            }
        }

        func pixel(_ x: Int, _ y: Int) -> (b: Double, g: Double, r: Double) {
            let i = misalign + y * stride + x * 4
            return (Double(bytes[i]), Double(bytes[i + 1]), Double(bytes[i + 2]))
        }

        mutating func set(_ x: Int, _ y: Int, _ c: (b: UInt8, g: UInt8, r: UInt8)) {
            let i = misalign + y * stride + x * 4
            bytes[i] = c.b
            bytes[i + 1] = c.g
            bytes[i + 2] = c.r
        }

        func withRows<T>(_ firstRow: Int, _ body: (UnsafeRawPointer) -> T) -> T {
            bytes.withUnsafeBytes { body($0.baseAddress! + misalign + firstRow * stride) }
        }
    }

    func convert(_ source: Source, _ converter: FrameConverter, bands: [Range<Int>]? = nil) -> [UInt8] {
        var slot = [UInt8](repeating: Self.sentinel, count: converter.format.frameByteCount)
        slot.withUnsafeMutableBytes { out in
            for band in bands ?? [0..<source.height] {
                source.withRows(band.lowerBound) {
                    converter.convert(
                        bgrx: $0, sourceStride: source.stride, firstRow: band.lowerBound, rowCount: band.count,
                        into: out.baseAddress!)
                }
            }
        }
        return slot
    }

    /// The exact BT.709 conversion, rounded and clamped.
    static func reference(_ c: (b: Double, g: Double, r: Double), _ range: ColorRange) -> (y: Int, cb: Int, cr: Int) {
        let y = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b
        let (ys, cs, offset) = range == .limited ? (219.0 / 255, 224.0 / 255, 16.0) : (1, 1, 0)
        func byte(_ v: Double) -> Int { Int(min(255, max(0, v.rounded()))) }
        return (byte(offset + ys * y), byte(128 + cs * (c.b - y) / 1.8556), byte(128 + cs * (c.r - y) / 1.5748))
    }

    /// Checks every Y', Cb and Cr byte of a converted frame against the reference, within ±1.
    func expectMatchesReference(
        _ frame: [UInt8], _ source: Source, _ format: VideoFormat, _ range: ColorRange,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let planes = format.planes
        var worst = 0
        var failures: [String] = []
        func check(_ got: UInt8, _ want: Int, _ what: String) {
            let error = abs(Int(got) - want)
            worst = max(worst, error)
            if error > 1 && failures.count < 5 { failures.append("\(what): \(got), want \(want)") }
        }
        for y in 0..<source.height {
            for x in 0..<source.width {
                check(
                    frame[planes[0].offset + y * planes[0].stride + x], Self.reference(source.pixel(x, y), range).y,
                    "Y'(\(x), \(y))")
            }
        }
        for by in 0..<(source.height / 2) {
            for bx in 0..<(source.width / 2) {
                let p = [
                    source.pixel(2 * bx, 2 * by), source.pixel(2 * bx + 1, 2 * by), source.pixel(2 * bx, 2 * by + 1),
                    source.pixel(2 * bx + 1, 2 * by + 1),
                ]
                let mean = (
                    b: p.map(\.b).reduce(0, +) / 4, g: p.map(\.g).reduce(0, +) / 4, r: p.map(\.r).reduce(0, +) / 4
                )
                let want = Self.reference(mean, range)
                let (cb, cr): (UInt8, UInt8)
                if format.pixelFormat == .nv12 {
                    let i = planes[1].offset + by * planes[1].stride + 2 * bx
                    (cb, cr) = (frame[i], frame[i + 1])
                } else {
                    (cb, cr) = (
                        frame[planes[1].offset + by * planes[1].stride + bx],
                        frame[planes[2].offset + by * planes[2].stride + bx]
                    )
                }
                check(cb, want.cb, "Cb(\(bx), \(by))")
                check(cr, want.cr, "Cr(\(bx), \(by))")
            }
        }
        #expect(
            failures.isEmpty, "\(format) \(range): worst error \(worst): \(failures)", sourceLocation: sourceLocation)
    }

    /// Every byte of the frame's stride padding is still the sentinel.
    func expectPaddingUntouched(
        _ frame: [UInt8], _ format: VideoFormat, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let planes = format.planes
        let rowBytes =
            format.pixelFormat == .bgrx
            ? [format.width * 4]
            : format.pixelFormat == .nv12
                ? [format.width, format.width] : [format.width, format.width / 2, format.width / 2]
        var written = 0
        for (plane, bytes) in zip(planes, rowBytes) {
            for row in 0..<plane.height {
                let start = plane.offset + row * plane.stride
                written += frame[(start + bytes)..<(start + plane.stride)].filter { $0 != Self.sentinel }.count
            }
        }
        #expect(written == 0, "\(written) padding bytes written in \(format)", sourceLocation: sourceLocation)
    }

    @Test(arguments: [PixelFormat.nv12, .i420], ColorRange.allCases)
    func randomPixelsMatchTheExactConversion(_ pixelFormat: PixelFormat, _ range: ColorRange) {
        for width in [16, 18, 50, 64] {
            var source = Source(
                width: width, height: 8, padding: width == 50 ? 12 : 0, misalign: width == 18 ? 1 : 0,
                seed: UInt64(width))
            // The extremes: every combination of 0 and 255.
            for i in 0..<8 {
                source.set(i, 7, (i & 1 == 0 ? 0 : 255, i & 2 == 0 ? 0 : 255, i & 4 == 0 ? 0 : 255))
            }
            let format = VideoFormat(width: width, height: 8, pixelFormat: pixelFormat)
            let frame = convert(source, FrameConverter(format: format, range: range))
            expectMatchesReference(frame, source, format, range)
            expectPaddingUntouched(frame, format)
        }
    }

    @Test(arguments: [PixelFormat.nv12, .i420], ColorRange.allCases)
    func colourBars(_ pixelFormat: PixelFormat, _ range: ColorRange) {
        // Each bar 4 pixels wide: two whole blocks, and the bars straddle the 16-pixel steps.
        var source = Source(width: 32, height: 2)
        for x in 0..<32 {
            for y in 0..<2 { source.set(x, y, Self.bars[x / 4]) }
        }
        let format = VideoFormat(width: 32, height: 2, pixelFormat: pixelFormat)
        let frame = convert(source, FrameConverter(format: format, range: range))
        expectMatchesReference(frame, source, format, range)
        // Black and white are exact: the weights of each row add up to its scale.
        let (white, black) = (frame[0], frame[31])
        #expect((white, black) == (range == .limited ? (235, 16) : (255, 0)))
        let chroma = format.planes[1].offset
        #expect(
            frame[chroma] == 128
                && frame[chroma + (pixelFormat == .nv12 ? 1 : format.planes[2].offset - chroma)] == 128,
            "white has no colour")
    }

    @Test(arguments: [PixelFormat.nv12, .i420, .bgrx])
    func bandsInAnyOrderMakeTheSameFrame(_ pixelFormat: PixelFormat) {
        let source = Source(width: 50, height: 24, padding: 4)
        let converter = FrameConverter(format: VideoFormat(width: 50, height: 24, pixelFormat: pixelFormat))
        let whole = convert(source, converter)
        let eights = convert(source, converter, bands: [16..<24, 0..<8, 8..<16])
        let twos = convert(source, converter, bands: stride(from: 0, to: 24, by: 2).map { $0..<($0 + 2) }.reversed())
        let mixed = convert(source, converter, bands: [6..<8, 20..<24, 0..<6, 8..<20])
        #expect(eights == whole && twos == whole && mixed == whole)
        // A band writes its own rows and nothing else.
        let band = convert(source, converter, bands: [10..<14])
        let planes = converter.format.planes
        for (index, plane) in planes.enumerated() {
            let rows = index == 0 || pixelFormat == .bgrx ? 10..<14 : 5..<7
            for row in 0..<plane.height where !rows.contains(row) {
                let bytes = band[(plane.offset + row * plane.stride)..<(plane.offset + (row + 1) * plane.stride)]
                #expect(bytes.allSatisfy { $0 == Self.sentinel }, "plane \(index) row \(row)")
            }
        }
    }

    @Test(arguments: [PixelFormat.nv12, .i420, .bgrx])
    func copyRowsCopiesThoseRowsOfEveryPlane(_ pixelFormat: PixelFormat) {
        let format = VideoFormat(width: 40, height: 16, pixelFormat: pixelFormat)
        let converter = FrameConverter(format: format)
        let previous = (0..<format.frameByteCount).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) }
        var slot = [UInt8](repeating: Self.sentinel, count: format.frameByteCount)
        previous.withUnsafeBytes { from in
            slot.withUnsafeMutableBytes {
                converter.copyRows(firstRow: 4, rowCount: 6, from: from.baseAddress!, to: $0.baseAddress!)
            }
        }
        for (index, plane) in format.planes.enumerated() {
            let rows = index == 0 || pixelFormat == .bgrx ? 4..<10 : 2..<5
            for row in 0..<plane.height {
                let range = (plane.offset + row * plane.stride)..<(plane.offset + (row + 1) * plane.stride)
                if rows.contains(row) {
                    #expect(slot[range] == previous[range], "plane \(index) row \(row) copied")
                } else {
                    #expect(slot[range].allSatisfy { $0 == Self.sentinel }, "plane \(index) row \(row) untouched")
                }
            }
        }
    }

    /// Black painted over a converted frame (an excluded window that moved while the frame was grabbed) is what
    /// converting black there makes: the rectangle widened to even edges and clipped to the frame, nothing else.
    @Test(arguments: [PixelFormat.nv12, .i420, .bgrx], ColorRange.allCases)
    func fillBlackIsConvertedBlackOnEvenEdges(_ pixelFormat: PixelFormat, _ range: ColorRange) {
        var source = Source(width: 50, height: 24, padding: 4)
        let converter = FrameConverter(
            format: VideoFormat(width: 50, height: 24, pixelFormat: pixelFormat), range: range)
        var filled = convert(source, converter)
        let rects = [ScreenRect(x: 3, y: 5, width: 10, height: 6), ScreenRect(x: 44, y: -3, width: 20, height: 6)]
        filled.withUnsafeMutableBytes { slot in for rect in rects { converter.fillBlack(rect, in: slot.baseAddress!) } }
        // The same rectangles, widened to even edges and clipped, black before converting.
        for (xs, ys) in [(2..<14, 4..<12), (44..<50, 0..<4)] {
            for y in ys {
                for x in xs {
                    source.set(x, y, (0, 0, 0))
                    source.bytes[source.misalign + y * source.stride + x * 4 + 3] = 0  // BGRx's x, which BGRx frames keep
                }
            }
        }
        let expected = convert(source, converter)
        let differences = zip(filled, expected).enumerated().filter { abs(Int($0.element.0) - Int($0.element.1)) > 1 }
        #expect(differences.isEmpty, "\(differences.count) bytes differ, first at \(differences.first?.offset ?? -1)")
        expectPaddingUntouched(filled, converter.format)
    }

    @Test func bgrxRowsAreCopied() {
        let source = Source(width: 18, height: 4, padding: 8, misalign: 3)
        let format = VideoFormat(width: 18, height: 4, pixelFormat: .bgrx)
        let frame = convert(source, FrameConverter(format: format))
        let plane = format.planes[0]
        for row in 0..<4 {
            let start = source.misalign + row * source.stride
            #expect(frame[(row * plane.stride)..<(row * plane.stride + 72)] == source.bytes[start..<(start + 72)])
        }
        expectPaddingUntouched(frame, format)
    }

    @Test func weightsAreTheMatrixInFixedPoint() {
        for range in ColorRange.allCases {
            let w = FrameConverter.Weights(range)
            let limited = range == .limited
            // Y': B, R and G weights times 2^15 (219/255 of that in limited range), adding up to the scale.
            #expect(Int(w.lumaBR[0]) + Int(w.lumaBR[1]) + Int(w.lumaGX[0]) == (limited ? 28142 : 32768))
            #expect(w.lumaGX[1] == 0 && w.cbGX[1] == 0 && w.crGX[1] == 0, "the x byte weighs nothing")
            #expect(
                Int(w.cbBR[0]) + Int(w.cbBR[1]) + Int(w.cbGX[0]) == 0
                    && Int(w.crBR[0]) + Int(w.crBR[1]) + Int(w.crGX[0]) == 0)
            #expect(w.cbBR[0] == w.crBR[1] && w.cbBR[0] == (limited ? 7196 : 8192), "Cb's B and Cr's R weigh one half")
        }
    }

    #if arch(x86_64)
        @Test func portableHelpersMatchSSE2() {
            var state: UInt64 = 7
            func random() -> Int16 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return Int16(truncatingIfNeeded: state >> 40)
            }
            for _ in 0..<200 {
                var a = FrameConverter.Lanes()
                var b = FrameConverter.Lanes()
                for i in 0..<8 { (a[i], b[i]) = (random(), random()) }
                let s = FrameConverter.Sums(Int32(a[0]) << 8, Int32(b[1]) << 4, Int32(a[2]), Int32(b[3]) * 3)
                #expect(FrameConverter.multiplyAdd(a, b) == FrameConverter.portableMultiplyAdd(a, b))
                #expect(FrameConverter.narrow(s, s &* 2) == FrameConverter.portableNarrow(s, s &* 2))
                #expect(FrameConverter.narrowToBytes(a, b) == FrameConverter.portableNarrowToBytes(a, b))
            }
        }
    #endif
}
