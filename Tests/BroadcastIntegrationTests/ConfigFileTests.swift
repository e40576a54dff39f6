import BroadcastInspect
import Foundation
import Testing

/// broadcastd's configuration file: found in XDG_CONFIG_HOME, overridden by options, printed by
/// --print-config, and refused with the file and line when it is wrong.
extension Integration {
    @Suite struct ConfigFileTests {
        let directory: String

        init() throws {
            directory =
                FileManager.default.temporaryDirectory.appendingPathComponent(
                    "broadcastd-config-\(UUID().uuidString.prefix(8))"
                ).path
            try FileManager.default.createDirectory(
                atPath: directory + "/broadcastd", withIntermediateDirectories: true)
        }

        func write(_ text: String) throws -> String {
            let path = directory + "/broadcastd/broadcastd.toml"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        func broadcastd(_ arguments: [String]) throws -> ToolResult {
            try runTool(Paths.binary("broadcastd"), arguments, environment: ["XDG_CONFIG_HOME": directory], timeout: 10)
        }

        @Test func theFileInXDGConfigHomeIsReadAndOptionsOverrideIt() throws {
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try write("# mine\nsource = \"synthetic\"\nfps = 60\nsize = \"640x360\"\n")
            let printed = try broadcastd(["--print-config", "--fps", "24"])
            #expect(printed.status == 0, "\(printed.stderr)")
            #expect(printed.stdout.contains("then \(path), then the command line"))
            #expect(printed.stdout.contains("\nsource = \"synthetic\"  # \(path):2\n"))
            #expect(printed.stdout.contains("\nfps = 24  # command line\n"))
            #expect(printed.stdout.contains("\nmemory-budget = 50\n"))
            // Every option of --help is a key of the file, and the printed file is accepted as one.
            let help = try broadcastd(["--help"]).stdout
            for line in printed.stdout.split(separator: "\n") where !line.hasPrefix("#") && line.contains(" = ") {
                let key = line.prefix(while: { $0 != " " })
                #expect(help.contains("--\(key)") || help.contains("--[no-]\(key)"), "\(key) is not an option")
            }
            let reread = try write(printed.stdout)
            #expect(try broadcastd(["--config", reread, "--print-config"]).stdout.contains("\nfps = 24  # \(reread):"))
        }

        @Test func aDaemonRunsWithTheFilesSettings() throws {
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try write("source = \"synthetic\"\nsize = \"320x240\"\nfps = 10\n")
            let daemon = try DaemonHarness(["--config", path])
            let controller = try daemon.subscribedController()
            let summaryPath = daemon.summaryPath("config")
            let id = try daemon.start(handler: "inspect", url: "file://" + summaryPath, maxDuration: 1, on: controller)
            #expect(try daemon.awaitFinish(controller, id) == nil)
            let summary = try InspectSummary.load(summaryPath)
            #expect(summary.video?.width == 320 && summary.video?.height == 240)
            let frames = try #require(summary.streams["video"]).count
            #expect((9...11).contains(frames), "\(frames) frames in 1 s at fps = 10")
            try daemon.stop()
        }

        @Test func aWrongFileStopsTheDaemonWithTheFileAndLine() throws {
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = try write("source = \"synthetic\"\n\nfsp = 60\n")
            let socket = directory + "/s.sock"
            let unknown = try broadcastd(["--socket", socket])
            #expect(unknown.status == 78, "EX_CONFIG, which the unit does not restart for")
            #expect(unknown.stderr.contains("\(path):3: unknown key 'fsp'; did you mean 'fps'?"), "\(unknown.stderr)")
            #expect(!FileManager.default.fileExists(atPath: socket))

            _ = try write("source = \"x11\"\nsync-marks = true\n")
            let combination = try broadcastd(["--socket", socket])
            #expect(combination.status == 78)
            #expect(
                combination.stderr.contains(
                    "\(path):2: sync-marks and audio-clock-ppm are features of the synthetic source"),
                "\(combination.stderr)")
            // The option that fixes it wins over the file.
            #expect(try broadcastd(["--source", "synthetic", "--print-config"]).status == 0)
            _ = try write("source = \"pipewire\"\nportal-source = \"screen\"\n")
            let badChoice = try broadcastd(["--socket", socket])
            #expect(
                badChoice.status == 78 && badChoice.stderr.contains("\(path):2:")
                    && badChoice.stderr.contains("monitor, window, any"), "\(badChoice.stderr)")
            _ = try write("source = \"pipewire\"\nportal-source = \"window\"\n")
            #expect(try broadcastd(["--print-config"]).status == 0)

            let missing = try broadcastd(["--config", directory + "/nope.toml"])
            #expect(missing.status == 78)
            #expect(missing.stderr.contains("nope.toml: cannot read the configuration file: No such file or directory"))
            let option = try broadcastd(["--fps", "0"])
            #expect(option.status == 64)
            #expect(option.stderr.contains("--fps 0: must be from 1 to 240"))
        }
    }
}
