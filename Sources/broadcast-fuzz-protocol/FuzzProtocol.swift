import BroadcastProtocolFuzzing
import Foundation

/// Which decoder is fuzzed: the message stream (default) or, with BROADCASTD_FUZZ_TARGET=json, JSON payloads.
let fuzzesJSON = ProcessInfo.processInfo.environment["BROADCASTD_FUZZ_TARGET"] == "json"

func exercise(_ input: [UInt8]) -> Int {
    if fuzzesJSON {
        JSONFuzzing.exercise(input)
        return 1
    }
    return ProtocolFuzzing.exercise(input)
}

/// libFuzzer's entry point when built with `--sanitize fuzzer -Xswiftc -DFUZZING` (scripts/fuzz.sh).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProtocol(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = exercise(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

#if !FUZZING
    /// Built normally: replays inputs (files, or every file in a folder), or writes the seed corpus.
    @main struct ReplayProtocolInputs {
        static func main() throws {
            let arguments = Array(CommandLine.arguments.dropFirst())
            if arguments.first == "--write-seeds", arguments.count == 2 {
                for (i, seed) in (fuzzesJSON ? JSONFuzzing.seeds : ProtocolFuzzing.seeds).enumerated() {
                    try Data(seed).write(to: URL(fileURLWithPath: arguments[1]).appendingPathComponent("seed-\(i)"))
                }
                return
            }
            guard !arguments.isEmpty, !arguments.contains(where: { $0.hasPrefix("-") }) else {
                FileHandle.standardError.write(
                    Data(
                        "usage: [BROADCASTD_FUZZ_TARGET=json] broadcast-fuzz-protocol FILE|FOLDER...  |  --write-seeds FOLDER\n"
                            .utf8))
                exit(64)
            }
            for argument in arguments {
                var isFolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: argument, isDirectory: &isFolder) else {
                    FileHandle.standardError.write(
                        Data("broadcast-fuzz-protocol: \(argument): no such file or folder\n".utf8))
                    exit(66)
                }
                let files =
                    isFolder.boolValue
                    ? try FileManager.default.contentsOfDirectory(atPath: argument).sorted().map { argument + "/" + $0 }
                    : [argument]
                for file in files {
                    let count = exercise(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
                    print("\(file): \(count) message(s)")
                }
            }
        }
    }
#endif
