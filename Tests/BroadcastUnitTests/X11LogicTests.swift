import BroadcastCapture
import BroadcastCore
import BroadcastProtocol
import Testing

@testable import BroadcastX11

/// The X11 backend's pure logic: capture areas, dirty bands, cursor blending, CURSOR decoding.
@Suite struct X11LogicTests {
    let outputs = [
        ScreenOutput(name: "HDMI-1", rect: ScreenRect(x: 1920, y: 0, width: 1280, height: 1024)),
        ScreenOutput(name: "odd", rect: ScreenRect(x: 0, y: 0, width: 1365, height: 767)),
    ]

    @Test func regionsParseAndRejectNonsense() {
        #expect(ScreenRect(region: "10,20,640x480") == ScreenRect(x: 10, y: 20, width: 640, height: 480))
        #expect(ScreenRect(region: "10,20,640X480") != nil)
        for bad in ["", "10,20", "10,20,640", "-1,0,10x10", "0,0,0x10", "a,b,cxd", "0,0,10x10,1"] {
            #expect(ScreenRect(region: bad) == nil, "\(bad)")
        }
    }

    @Test func targetsResolveToEvenRectanglesOnTheScreen() throws {
        #expect(
            try CaptureTarget.screen.resolve(screenWidth: 1921, screenHeight: 1081, outputs: [])
                == ScreenRect(x: 0, y: 0, width: 1920, height: 1080))
        #expect(
            try CaptureTarget.output("HDMI-1").resolve(screenWidth: 3200, screenHeight: 1080, outputs: outputs)
                == ScreenRect(x: 1920, y: 0, width: 1280, height: 1024))
        #expect(
            try CaptureTarget.output("odd").resolve(screenWidth: 3200, screenHeight: 1080, outputs: outputs)
                == ScreenRect(x: 0, y: 0, width: 1364, height: 766))
        // A region reaching past the screen is refused; once capturing, a screen that shrank clips it.
        let past = CaptureTarget.region(ScreenRect(x: 1800, y: 1000, width: 640, height: 480))
        #expect(throws: CaptureAreaError.self) { try past.resolve(screenWidth: 1920, screenHeight: 1080, outputs: []) }
        #expect(
            try past.resolve(screenWidth: 1920, screenHeight: 1080, outputs: [], clipsRegion: true)
                == ScreenRect(x: 1800, y: 1000, width: 120, height: 80))
        let inside = ScreenRect(x: 1280, y: 600, width: 640, height: 480)
        #expect(try CaptureTarget.region(inside).resolve(screenWidth: 1920, screenHeight: 1080, outputs: []) == inside)
    }

    @Test func targetsThatCannotBeCapturedSayWhy() {
        func message(_ target: CaptureTarget) -> String {
            do {
                _ = try target.resolve(screenWidth: 1920, screenHeight: 1080, outputs: outputs)
                return ""
            } catch { return error.description }
        }
        #expect(message(.output("DP-3")) == "no output named 'DP-3'; available: HDMI-1, odd")
        #expect(message(.output("HDMI-1")).contains("outside the screen"))
        #expect(
            message(.region(ScreenRect(x: 2000, y: 0, width: 10, height: 10)))
                .contains("does not lie within the 1920x1080 screen"))
        #expect(
            message(.region(ScreenRect(x: 1800, y: 1000, width: 640, height: 480)))
                == "region 640x480+1800+1000 does not lie within the 1920x1080 screen")
        #expect(message(.region(ScreenRect(x: 1910, y: 0, width: 10, height: 100))).contains("at least 16x16"))
    }

    @Test func dirtyBandsFollowTheRowsThatChanged() {
        var bands = DirtyBands(height: 100, bandRows: 32)
        #expect(bands.count == 4 && !bands.isEmpty)
        #expect(bands.rows(3) == 96..<100)
        bands.clear()
        #expect(bands.isEmpty)
        bands.mark(rows: 31, 33)
        #expect((0..<4).map { bands[$0] } == [true, true, false, false])
        bands.clear()
        bands.mark(rows: -50, 1)
        bands.mark(rows: 99, 500)
        #expect((0..<4).map { bands[$0] } == [true, false, false, true])
        bands.clear()
        bands.mark(rows: 120, 130)
        bands.mark(rows: 10, 10)
        #expect(bands.isEmpty)
    }

    @Test func bandRowsAreEvenAndAboutAQuarterMegabyte() {
        #expect(BandGrabber.bandRows(width: 1920) == 34)
        #expect(BandGrabber.bandRows(width: 3840) == 16)
        #expect(BandGrabber.bandRows(width: 200_000) == 2)
        for width in [16, 641, 1366, 7680] { #expect(BandGrabber.bandRows(width: width) % 2 == 0) }
    }

    @Test func theCursorIsBlendedPremultipliedAndClippedToTheBand() {
        // A 2x2 sprite: opaque red, transparent, half-transparent white (premultiplied), opaque blue.
        let sprite = CursorSprite(
            width: 2, height: 2, hotspotX: 0, hotspotY: 0,
            pixels: [0xffff_0000, 0x0000_0000, 0x8080_8080, 0xff00_00ff], serial: 1)
        // A 4-pixel-wide band holding rows 10 and 11, all mid grey; the sprite's top left at (3, 11).
        var band = [UInt32](repeating: 0x0040_4040, count: 8)
        band.withUnsafeMutableBytes {
            X11ScreenSource.draw(
                sprite, at: ScreenRect(x: 3, y: 11, width: 2, height: 2), into: $0.baseAddress!, stride: 16,
                rows: 10..<12)
        }
        #expect(band[0..<4].allSatisfy { $0 == 0x0040_4040 }, "row 10 is above the sprite")
        #expect(band[4..<7].allSatisfy { $0 == 0x0040_4040 })
        #expect(band[7] == 0x00ff_0000, "opaque red replaces the pixel; the column past the band's width is clipped")
        var second = [UInt32](repeating: 0x0040_4040, count: 8)
        second.withUnsafeMutableBytes {
            X11ScreenSource.draw(
                sprite, at: ScreenRect(x: 0, y: 11, width: 2, height: 2), into: $0.baseAddress!, stride: 16,
                rows: 12..<14)
        }
        // Sprite row 1 lands on row 12: 0x80 + 0x40 * 127 / 255 ≈ 0xa0 per channel, then opaque blue.
        #expect(second[0] == 0x00a0_a0a0 && second[1] == 0x0000_00ff)
        #expect(second[2...].allSatisfy { $0 == 0x0040_4040 })
    }

    @Test func cursorMessagesWithoutASpriteAreTwentyEightBytes() throws {
        let sample = CursorSample(presentationTime: 9, x: -3, y: 4, visible: false, sprite: nil)
        let payload = sample.message.payload
        #expect(payload.count == CursorSample.headerSize)
        #expect(try CursorSample(decoding: payload) == sample)
        #expect(throws: ProtocolError.self) { try CursorSample(decoding: payload + [0, 0, 0, 0]) }
        var claimsSprite = payload
        claimsSprite[16] = 3
        claimsSprite[20] = 1
        claimsSprite[22] = 1
        #expect(throws: ProtocolError.self) { try CursorSample(decoding: claimsSprite) }
    }
}
