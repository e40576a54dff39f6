import BroadcastCapture
import BroadcastCore
import BroadcastMedia
import BroadcastProtocol
import Logging
import Testing

@testable import BroadcastHandlerKit

/// Limits the third hardening round (issue 32) put where peers' input enters.
@Suite struct InputLimitRound3Tests {
    @Test func regionsParseWithinWhatAScreenCanHave() {
        #expect(ScreenRegion("0,0,32767x32767") == ScreenRegion("0,0,32767X32767"))
        #expect(ScreenRect(region: "32767,32767,1x1") == ScreenRect(x: 32767, y: 32767, width: 1, height: 1))
        for bad in [
            "9223372036854775807,0,2x2", "0,9223372036854775807,2x2", "0,0,9223372036854775807x2",
            "0,0,2x9223372036854775807",
            "32768,0,16x16", "0,32768,16x16", "0,0,32768x16", "0,0,16x32768", "0,0,0x16", "-1,0,16x16", "+1,0,16x16",
            "-0,0,16x16", "00000001,0,16x16", " 1,0,16x16", "1,,0,16x16", "1,0,16x16x", "1,0,16xx16", "0,0,16x16,",
        ] {
            #expect(ScreenRegion(bad) == nil, "\(bad)")
            #expect(ScreenRect(region: bad) == nil, "\(bad)")
            #expect(
                CaptureChoice(region: bad).problem
                    == "--region \(bad): takes X,Y,WIDTHxHEIGHT with X and Y from 0 to 32767 "
                    + "and sizes from 1 to 32767, e.g. 0,0,1280x720", "\(bad)")
        }
        // The largest region there is: its intersection with any screen cannot overflow.
        let largest = ScreenRect(region: "32767,32767,32767x32767")!
        #expect(largest.intersection(ScreenRect(x: 0, y: 0, width: 32767, height: 32767)) == nil)
        #expect(CaptureChoice(region: "0,0,32767x32767").problem == nil)
    }

    @Test func aFrameRateFromSetupIsOneTo240WhetherDeclaredOrNot() throws {
        let plain = HandlerManifest(name: "plain", displayName: "Plain", exec: "/bin/true")
        let declaring = HandlerManifest(
            name: "declaring", displayName: "Declaring", exec: "/bin/true",
            setupFields: [.init(name: "frameRate", prompt: "Frames per second")])
        for manifest in [plain, declaring] {
            // 30 / 1e-300 overflowed the frame divisor: broadcastd trapped when the broadcast started.
            for bad in ["1e-300", "0", "-5", "nan", "inf", "0.5", "241"] {
                #expect(
                    throws: BroadcastError(
                        .invalidRequest, "setup field 'frameRate' is frames per second, 1 to 240, not '\(bad)'")
                ) {
                    _ = try manifest.validate(url: nil, setupInfo: ["frameRate": bad])
                }
            }
            #expect(throws: Never.self) { _ = try manifest.validate(url: nil, setupInfo: ["frameRate": "24"]) }
        }
        // A handler that declares the field may take words in it (record's "input").
        #expect(throws: Never.self) { _ = try declaring.validate(url: nil, setupInfo: ["frameRate": "input"]) }
        #expect(throws: BroadcastError.self) { _ = try plain.validate(url: nil, setupInfo: ["frameRate": "input"]) }
    }
}

@Suite struct MarkAndResultLimitTests {
    @Test func marksAreCountedAndTheirTitlesBounded() throws {
        #expect(try Chapters.mark(at: 5, text: nil, count: 2).title == "Mark 3")
        #expect(
            try Chapters.mark(at: 5, text: .string(String(repeating: "é", count: 100)), count: 99).title.utf8.count
                == 200)
        #expect(throws: HandlerError.self) {
            try Chapters.mark(at: 5, text: .string(String(repeating: "é", count: 100) + "x"), count: 0)
        }
        #expect(throws: HandlerError.self) { try Chapters.mark(at: 5, text: nil, count: 100) }
        // Replay names marks by their number so far, and counts those it keeps.
        #expect(try Chapters.mark(at: 5, text: nil, count: 500, kept: 3).title == "Mark 501")
        #expect(throws: HandlerError.self) { try Chapters.mark(at: 5, text: nil, count: 5, kept: 100) }
    }

    @Test func aResultBeyondItsLimitLeavesOutItsLargestValues() throws {
        let big: [String: JSONValue] = [
            "duration": .number(12.5),
            "chapters": .array(Array(repeating: .string(String(repeating: "x", count: 1000)), count: 100)),
            "saves": .array(Array(repeating: .string(String(repeating: "y", count: 1000)), count: 40)),
        ]
        let message = BroadcastSampleHandler.resultMessage(big, logger: Logger(label: "test"))
        #expect(message.payload.count <= ProtocolLimits.maxResultPayload)
        let sent = try message.decode(HandlerResult.self).result
        #expect(sent == ["duration": .number(12.5), "saves": big["saves"]!, "omitted": .array([.string("chapters")])])
        let small: [String: JSONValue] = ["duration": .number(1)]
        #expect(
            try BroadcastSampleHandler.resultMessage(small, logger: Logger(label: "test")).decode(HandlerResult.self)
                .result == small)
    }
}

@Suite struct CommandArgumentTextTests {
    @Test func stringArgumentsWithControlCharactersOrTooLongAreRefused() {
        let manifest = HandlerManifest(
            name: "replay", displayName: "Replay", exec: "/bin/true",
            commands: [.init(name: "save", help: "Save", arguments: [.init(name: "file", help: "File")])])
        func check(_ value: JSONValue) -> BroadcastError? {
            if case .failure(let error) = manifest.checkedCommand(
                CommandRequest(command: "save", arguments: ["file": value]))
            {
                return error
            }
            return nil
        }
        #expect(
            check(.string("/tmp/a\nb.mp4"))
                == BroadcastError(
                    .invalidRequest,
                    "argument 'file' of command 'save' is refused: it contains a control character (U+000A)"))
        #expect(check(.string("/tmp/a\u{7f}.mp4"))?.message.contains("U+007F") == true)
        #expect(
            check(.string(String(repeating: "x", count: 9000)))?.message.contains(
                "it is 9000 bytes long; the limit is 8192") == true)
        #expect(check(.string("/tmp/ä b.mp4")) == nil && check(.number(3)) == nil)
    }
}

@Suite struct RequestFieldTests {
    @Test func aNumberThatDoesNotFitItsFieldIsNamed() {
        func why(_ json: String, _ type: (some Decodable).Type) -> String? {
            do { _ = try Message(.start, payload: Array(json.utf8)).decode(type) } catch {
                if case .malformed(_, let text) = error { return text }
            }
            return nil
        }
        let range =
            "holds a number its field cannot take (ids and other integers are whole numbers from 0 to 4294967295)"
        #expect(why(#"{"broadcast":-1,"command":"save"}"#, CommandRequest.self) == "'broadcast' " + range)
        #expect(
            why(#"{"handler":"inspect","maxDuration":-5,"capture":{"frameRate":1.5}}"#, StartRequest.self)
                == "'capture' " + range)
        #expect(
            why(#"{"handler":"inspect","capture":{"frameRate":"x"}}"#, StartRequest.self)
                == "wrong type at 'capture.frameRate'")
        #expect(why(#"{"handler":"inspect""#, StartRequest.self) == "payload is not valid JSON")
        #expect(Message(.start, payload: Array(#"{"broadcast":-1}"#.utf8)).isJSON)
        #expect(!Message(.start, payload: Array(#"{"broadcast":"#.utf8)).isJSON)
    }
}
