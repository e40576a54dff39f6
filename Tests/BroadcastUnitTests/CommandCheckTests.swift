import BroadcastCore
import BroadcastProtocol
import Foundation
import Testing

/// Revision 2.3: what broadcastd checks of a command before it forwards it, against the handler's manifest.
@Suite struct CommandCheckTests {
    static let manifest: HandlerManifest = {
        let json = """
            {"name":"replay","displayName":"Replay","exec":"x","commands":[
              {"name":"save","help":"Save the buffer","arguments":[
                {"name":"last","help":"Seconds","type":"number"},{"name":"file","help":"Where"},
                {"name":"open","help":"Open it","type":"bool"}]},
              {"name":"mark","help":"A chapter","arguments":[{"name":"text","help":"Its title","required":true}]}]}
            """
        return try! JSONDecoder().decode(HandlerManifest.self, from: Data(json.utf8))
    }()

    func check(_ command: String, _ arguments: [String: JSONValue]) -> Result<[String: JSONValue], BroadcastError> {
        Self.manifest.checkedCommand(CommandRequest(command: command, arguments: arguments)).map(\.arguments)
    }

    @Test func argumentsAreConvertedToTheirDeclaredTypes() throws {
        #expect(
            try check("save", ["last": .string("30"), "file": .string("a.mp4"), "open": .string("yes")]).get()
                == ["last": .number(30), "file": .string("a.mp4"), "open": .bool(true)])
        #expect(
            try check("save", ["last": .number(2.5), "file": .number(7)]).get() == [
                "last": .number(2.5), "file": .string("7"),
            ])
        #expect(try check("save", [:]).get() == [:])
    }

    @Test func wrongCommandsAndArgumentsAreRefusedSayingWhy() {
        func refusal(_ command: String, _ arguments: [String: JSONValue]) -> String? {
            if case .failure(let error) = check(command, arguments) {
                return error.code == .invalidRequest ? error.message : nil
            }
            return nil
        }
        #expect(refusal("delete", [:]) == "handler 'replay' has no command 'delete' (its commands: save, mark)")
        #expect(
            refusal("save", ["length": .number(3)])
                == "command 'save' of handler 'replay' has no argument 'length' (its arguments: last, file, open)")
        #expect(
            refusal("save", ["last": .string("soon")]) == "argument 'last' of command 'save' is a number, not \"soon\"")
        #expect(
            refusal("save", ["last": .string("inf")]) == "argument 'last' of command 'save' is a number, not \"inf\"")
        #expect(
            refusal("save", ["open": .string("maybe")]) == "argument 'open' of command 'save' is a bool, not \"maybe\"")
        #expect(refusal("save", ["file": .array([])]) == "argument 'file' of command 'save' is a string, not []")
        #expect(refusal("mark", [:]) == "command 'mark' needs argument 'text' (Its title)")
        var none = Self.manifest
        none.commands = nil
        if case .failure(let error) = none.checkedCommand(CommandRequest(command: "save")) {
            #expect(error.message == "handler 'replay' takes no commands")
        } else {
            Issue.record("a handler without commands took one")
        }
    }

    @Test func theManifestKeepsItsCommandsWhenEncoded() throws {
        let encoded = try JSONEncoder().encode(Self.manifest)
        #expect(try JSONDecoder().decode(HandlerManifest.self, from: encoded) == Self.manifest)
    }
}
