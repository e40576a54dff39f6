import BroadcastCore

#if arch(x86_64)
    import _Builtin_intrinsics.intel
#endif

/// The quantisation range of the BT.709 Y'CbCr a `FrameConverter` writes.
public enum ColorRange: String, Sendable, CaseIterable {
    /// Y' 16…235, Cb and Cr 16…240: what encoders and players assume unless told otherwise.
    case limited
    /// Y', Cb and Cr 0…255.
    case full
}

/// Converts X11's 32-bit BGRx pixels into one of broadcastd's frame layouts a band of rows at a time,
/// so that a capture source can convert only the bands that changed and carry the others over.
///
/// Y'CbCr is BT.709 in fixed point, within ±1 of the exactly rounded result; Cb and Cr are taken from the
/// average of each 2x2 block. The loop converts 16 pixels of two rows at once: it splits them into even and
/// odd columns, views each pixel as the 16-bit lane pairs [B, R] and [G, x], and gets Y' from two
/// multiply-adds per four pixels; the four pixels of each block are summed in those lanes and go through
/// the same multiply-adds for Cb and Cr. Even and odd results interleave back into bytes with a shift.
/// On x86-64 the multiply-add and the narrowing are SSE2's pmaddwd and packssdw, called as intrinsics:
/// LLVM does not reliably find them in the equivalent generic SIMD code. Widths that are not a multiple
/// of 16 end with a step that overlaps the one before it.
public struct FrameConverter: Sendable {
    public let format: VideoFormat
    public let range: ColorRange
    private let planes: [Plane]
    private let weights: Weights

    public init(format: VideoFormat, range: ColorRange = .limited) {
        precondition(
            format.width >= 16 && format.width % 2 == 0 && format.height % 2 == 0,
            "a converted frame's width is even and at least 16, its height even")
        self.format = format
        self.range = range
        planes = format.planes
        weights = Weights(range)
    }

    /// Converts `rowCount` rows of BGRx pixels (format.width pixels per row, `sourceStride` bytes apart;
    /// byte order B, G, R, x) into rows firstRow..<firstRow+rowCount of the frame in `slot` (laid out as
    /// format.planes). firstRow and rowCount are even. Bytes past the width of a row are not written.
    public func convert(
        bgrx: UnsafeRawPointer, sourceStride: Int, firstRow: Int, rowCount: Int, into slot: UnsafeMutableRawPointer
    ) {
        checkBand(firstRow, rowCount)
        let width = format.width
        let last = width - 16
        let w = weights
        switch format.pixelFormat {
        case .bgrx:
            let plane = planes[0]
            for row in 0..<rowCount {
                (slot + plane.offset + (firstRow + row) * plane.stride).copyMemory(
                    from: bgrx + row * sourceStride, byteCount: width * 4)
            }
        case .nv12:
            let luma = planes[0]
            let chroma = planes[1]
            for pair in 0..<(rowCount / 2) {
                let row = firstRow + pair * 2
                let source = bgrx + pair * 2 * sourceStride
                let y = slot + luma.offset + row * luma.stride
                let uv = slot + chroma.offset + row / 2 * chroma.stride
                var x = 0
                while true {
                    let c = Self.convert16(source + x * 4, sourceStride, y + x, luma.stride, w)
                    (uv + x).storeBytes(of: Self.interleave(c.cb, c.cr), as: SIMD8<UInt16>.self)
                    if x == last { break }
                    x = min(x + 16, last)
                }
            }
        case .i420:
            let luma = planes[0]
            let u = planes[1]
            let v = planes[2]
            for pair in 0..<(rowCount / 2) {
                let row = firstRow + pair * 2
                let source = bgrx + pair * 2 * sourceStride
                let y = slot + luma.offset + row * luma.stride
                let cb = slot + u.offset + row / 2 * u.stride
                let cr = slot + v.offset + row / 2 * v.stride
                var x = 0
                while true {
                    let c = Self.convert16(source + x * 4, sourceStride, y + x, luma.stride, w)
                    let both = Self.narrowToBytes(c.cb, c.cr)
                    (cb + (x >> 1)).storeBytes(of: both.lowHalf, as: SIMD8<UInt8>.self)
                    (cr + (x >> 1)).storeBytes(of: both.highHalf, as: SIMD8<UInt8>.self)
                    if x == last { break }
                    x = min(x + 16, last)
                }
            }
        }
    }

    /// Copies rows firstRow..<firstRow+rowCount (even, as for `convert`) of every plane from one frame slot
    /// to another: how unchanged bands are carried over from the previous frame.
    public func copyRows(
        firstRow: Int, rowCount: Int, from previous: UnsafeRawPointer, to slot: UnsafeMutableRawPointer
    ) {
        checkBand(firstRow, rowCount)
        for (index, plane) in planes.enumerated() {
            let shift = index > 0 ? 1 : 0
            let start = plane.offset + (firstRow >> shift) * plane.stride
            (slot + start).copyMemory(from: previous + start, byteCount: (rowCount >> shift) * plane.stride)
        }
    }

    /// Paints `rect` (frame pixels, widened to even edges, clipped to the frame) black in the frame in `slot`: what
    /// was converted there is covered after the fact.
    public func fillBlack(_ rect: ScreenRect, in slot: UnsafeMutableRawPointer) {
        let left = max(0, rect.x & ~1)
        let top = max(0, rect.y & ~1)
        let right = min(format.width, (rect.x + rect.width + 1) & ~1)
        let bottom = min(format.height, (rect.y + rect.height + 1) & ~1)
        guard left < right, top < bottom else { return }
        func fill(_ plane: Plane, rows: Range<Int>, bytes: Range<Int>, with value: UInt8) {
            for row in rows {
                (slot + plane.offset + row * plane.stride + bytes.lowerBound).initializeMemory(
                    as: UInt8.self, repeating: value, count: bytes.count)
            }
        }
        let black: UInt8 = range == .limited ? 16 : 0
        switch format.pixelFormat {
        case .bgrx:
            fill(planes[0], rows: top..<bottom, bytes: left * 4..<right * 4, with: 0)
        case .nv12:
            fill(planes[0], rows: top..<bottom, bytes: left..<right, with: black)
            fill(planes[1], rows: top / 2..<bottom / 2, bytes: left..<right, with: 128)
        case .i420:
            fill(planes[0], rows: top..<bottom, bytes: left..<right, with: black)
            for plane in planes[1...] {
                fill(plane, rows: top / 2..<bottom / 2, bytes: left / 2..<right / 2, with: 128)
            }
        }
    }

    private func checkBand(_ firstRow: Int, _ rowCount: Int) {
        precondition(firstRow >= 0 && rowCount >= 0 && firstRow + rowCount <= format.height, "rows outside the frame")
        precondition(
            firstRow % 2 == 0 && rowCount % 2 == 0, "a band starts on an even row and has an even number of rows")
    }

    // MARK: - Fixed point

    typealias Lanes = SIMD8<Int16>
    typealias Sums = SIMD4<Int32>

    /// Weights for the [B, R] and [G, x] lane pairs of a pixel (or of the sums over a block).
    /// Y' = (B·b + R·r + G·g + lumaBias) >> 15 with BT.709's weights times 2^15 (and 219/255 in limited range);
    /// Cb, Cr = (ΣB·b + ΣR·r + ΣG·g + chromaBias) >> 16 over the four pixels of a block, with weights times
    /// 2^16 / 4 (and 224/255). A row's weights add up to its scale (Y') or to zero (Cb, Cr), so greys are exact.
    struct Weights: Sendable {
        var lumaBR: Lanes, lumaGX: Lanes, lumaBias: Sums
        var cbBR: Lanes, cbGX: Lanes, crBR: Lanes, crGX: Lanes
        /// Half a unit short of rounding, so that full range's Cb or Cr of 255.5 stays 255 without a clamp.
        var chromaBias = Sums(repeating: 128 << 16 + 1 << 15 - 1)

        init(_ range: ColorRange) {
            let limited = range == .limited
            func pair(_ a: Int, _ b: Int) -> Lanes {
                Lanes(
                    lowHalf: SIMD4(Int16(a), Int16(b), Int16(a), Int16(b)),
                    highHalf: SIMD4(Int16(a), Int16(b), Int16(a), Int16(b)))
            }
            let lumaScale = (limited ? 219.0 / 255 : 1) * 32768
            let r = Int((0.2126 * lumaScale).rounded())
            let b = Int((0.0722 * lumaScale).rounded())
            lumaBR = pair(b, r)
            lumaGX = pair(Int(lumaScale.rounded()) - r - b, 0)
            lumaBias = Sums(repeating: Int32((limited ? 16 << 15 : 0) + 1 << 14))
            // Cb's weight of B and Cr's of R are one half exactly.
            let chromaScale = (limited ? 224.0 / 255 : 1) * 16384
            let half = Int((0.5 * chromaScale).rounded())
            let cbR = -Int((0.2126 / 1.8556 * chromaScale).rounded())
            let crB = -Int((0.0722 / 1.5748 * chromaScale).rounded())
            cbBR = pair(half, cbR)
            cbGX = pair(-half - cbR, 0)
            crBR = pair(crB, half)
            crGX = pair(-half - crB, 0)
        }
    }

    // MARK: - Kernel

    /// Converts 16 pixels of two rows: stores their Y' and returns the Cb and Cr of their 8 blocks.
    @inline(__always)
    static func convert16(
        _ source: UnsafeRawPointer, _ sourceStride: Int, _ y: UnsafeMutableRawPointer, _ lumaStride: Int,
        _ w: Weights
    ) -> (cb: Lanes, cr: Lanes) {
        let p = load16(source)
        let q = load16(source + sourceStride)
        y.storeBytes(
            of: interleave(narrow(luma(p.0, w), luma(p.2, w)), narrow(luma(p.1, w), luma(p.3, w))),
            as: SIMD8<UInt16>.self)
        (y + lumaStride).storeBytes(
            of: interleave(narrow(luma(q.0, w), luma(q.2, w)), narrow(luma(q.1, w), luma(q.3, w))),
            as: SIMD8<UInt16>.self)
        // Blocks 0…3 are columns 0…7, blocks 4…7 columns 8…15.
        let br0 = p.0.br &+ p.1.br &+ q.0.br &+ q.1.br
        let gx0 = p.0.gx &+ p.1.gx &+ q.0.gx &+ q.1.gx
        let br1 = p.2.br &+ p.3.br &+ q.2.br &+ q.3.br
        let gx1 = p.2.gx &+ p.3.gx &+ q.2.gx &+ q.3.gx
        let cb0 = (multiplyAdd(br0, w.cbBR) &+ multiplyAdd(gx0, w.cbGX) &+ w.chromaBias) &>> 16
        let cb1 = (multiplyAdd(br1, w.cbBR) &+ multiplyAdd(gx1, w.cbGX) &+ w.chromaBias) &>> 16
        let cr0 = (multiplyAdd(br0, w.crBR) &+ multiplyAdd(gx0, w.crGX) &+ w.chromaBias) &>> 16
        let cr1 = (multiplyAdd(br1, w.crBR) &+ multiplyAdd(gx1, w.crGX) &+ w.chromaBias) &>> 16
        return (narrow(cb0, cb1), narrow(cr0, cr1))
    }

    typealias Pixels = (br: Lanes, gx: Lanes)

    /// Sixteen pixels of a row as [B, R] and [G, x] lane pairs: columns 0, 2, 4, 6; 1, 3, 5, 7; 8, 10, 12, 14; 9, 11, 13, 15.
    @inline(__always)
    static func load16(_ p: UnsafeRawPointer) -> (Pixels, Pixels, Pixels, Pixels) {
        let a = p.loadUnaligned(as: SIMD8<UInt32>.self)
        let b = p.loadUnaligned(fromByteOffset: 32, as: SIMD8<UInt32>.self)
        return (split(a.evenHalf), split(a.oddHalf), split(b.evenHalf), split(b.oddHalf))
    }

    @inline(__always)
    static func split(_ pixels: SIMD4<UInt32>) -> Pixels {
        let v = unsafeBitCast(pixels, to: SIMD8<UInt16>.self)
        return (unsafeBitCast(v & 0x00FF, to: Lanes.self), unsafeBitCast(v &>> 8, to: Lanes.self))
    }

    @inline(__always)
    static func luma(_ p: Pixels, _ w: Weights) -> Sums {
        (multiplyAdd(p.br, w.lumaBR) &+ multiplyAdd(p.gx, w.lumaGX) &+ w.lumaBias) &>> 15
    }

    /// Bytes a0, b0, a1, b1, … from two lane vectors of values 0…255.
    @inline(__always)
    static func interleave(_ a: Lanes, _ b: Lanes) -> SIMD8<UInt16> {
        unsafeBitCast(a, to: SIMD8<UInt16>.self) | unsafeBitCast(b, to: SIMD8<UInt16>.self) &<< 8
    }

    #if arch(x86_64)
        /// The products of adjacent 16-bit lanes, summed in pairs (pmaddwd).
        @inline(__always)
        static func multiplyAdd(_ a: Lanes, _ b: Lanes) -> Sums {
            unsafeBitCast(
                _mm_madd_epi16(unsafeBitCast(a, to: __m128i.self), unsafeBitCast(b, to: __m128i.self)), to: Sums.self)
        }

        /// a then b, saturated to 16 bits (packssdw).
        @inline(__always)
        static func narrow(_ a: Sums, _ b: Sums) -> Lanes {
            unsafeBitCast(
                _mm_packs_epi32(unsafeBitCast(a, to: __m128i.self), unsafeBitCast(b, to: __m128i.self)), to: Lanes.self)
        }

        /// a then b, saturated to bytes (packuswb).
        @inline(__always)
        static func narrowToBytes(_ a: Lanes, _ b: Lanes) -> SIMD16<UInt8> {
            unsafeBitCast(
                _mm_packus_epi16(unsafeBitCast(a, to: __m128i.self), unsafeBitCast(b, to: __m128i.self)),
                to: SIMD16<UInt8>.self)
        }
    #else
        @inline(__always)
        static func multiplyAdd(_ a: Lanes, _ b: Lanes) -> Sums { portableMultiplyAdd(a, b) }
        @inline(__always)
        static func narrow(_ a: Sums, _ b: Sums) -> Lanes { portableNarrow(a, b) }
        @inline(__always)
        static func narrowToBytes(_ a: Lanes, _ b: Lanes) -> SIMD16<UInt8> { portableNarrowToBytes(a, b) }
    #endif

    // The same three in generic SIMD code, for other architectures (and compared with the above in tests).

    @inline(__always)
    static func portableMultiplyAdd(_ a: Lanes, _ b: Lanes) -> Sums {
        let products = SIMD8<Int32>(truncatingIfNeeded: a) &* SIMD8<Int32>(truncatingIfNeeded: b)
        return products.evenHalf &+ products.oddHalf
    }

    @inline(__always)
    static func portableNarrow(_ a: Sums, _ b: Sums) -> Lanes {
        let clamp = { (s: Sums) in
            SIMD4<Int16>(
                truncatingIfNeeded: s.clamped(lowerBound: Sums(repeating: -32768), upperBound: Sums(repeating: 32767)))
        }
        return Lanes(lowHalf: clamp(a), highHalf: clamp(b))
    }

    @inline(__always)
    static func portableNarrowToBytes(_ a: Lanes, _ b: Lanes) -> SIMD16<UInt8> {
        let clamp = { (l: Lanes) in
            SIMD8<UInt8>(truncatingIfNeeded: l.clamped(lowerBound: .zero, upperBound: Lanes(repeating: 255)))
        }
        return SIMD16(lowHalf: clamp(a), highHalf: clamp(b))
    }
}
