import Foundation
import Testing

/// `make install` and what it installs: the tree, the units, the completion scripts, the man pages;
/// and `--help` against the saved text in Tests/fixtures/help (UPDATE_HELP=1 rewrites it).
extension Integration {
    @Suite(.serialized) struct InstallTests {
        static let programs = ["broadcastd", "broadcastctl", "broadcast-setup"]
        static let handlers = [
            "broadcast-handler-inspect", "broadcast-handler-record", "broadcast-handler-stream",
            "broadcast-handler-replay", "broadcast-encoder",
        ]
        static let subcommands = [
            "handlers", "sources", "start", "record", "stream", "capture", "pause", "resume", "stop", "discard",
            "status", "snapshot", "send", "save", "mark",
        ]

        /// Runs make in the package root, installing the programs of this build.
        @discardableResult
        func make(_ arguments: [String]) throws -> ToolResult {
            let result = try runTool(
                "/usr/bin/env", ["make", "--no-print-directory", "-C", Paths.root, "BIN=" + Paths.binaries] + arguments)
            #expect(
                result.status == 0, "make \(arguments.joined(separator: " ")) failed:\n\(result.stdout)\(result.stderr)"
            )
            return result
        }

        /// Files (not directories) under `root`, as sorted relative paths.
        func files(under root: String) -> [String] {
            let enumerator = FileManager.default.enumerator(atPath: root)
            var result: [String] = []
            while let path = enumerator?.nextObject() as? String {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory),
                    !isDirectory.boolValue
                {
                    result.append(path)
                }
            }
            return result.sorted()
        }

        func listing(_ directory: String, suffixes: [String]) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: Paths.root + "/" + directory).filter { name in
                suffixes.contains { name.hasSuffix($0) }
            }
        }

        @Test func installLaysOutTheTreeAndUninstallRemovesIt() throws {
            let destination = FileManager.default.temporaryDirectory.appendingPathComponent(
                "broadcastd-install-\(UUID().uuidString.prefix(8))"
            ).path
            defer { try? FileManager.default.removeItem(atPath: destination) }
            try make(["install", "DESTDIR=" + destination, "PREFIX=/usr"])

            let units = try listing("systemd", suffixes: [".service", ".socket"])
            let manifests = try listing("share/broadcastd/handlers", suffixes: [".json"])
            #expect(
                units.contains("broadcastd.service") && manifests.contains("inspect.json")
                    && manifests.contains("record.json"))
            var expected = (Self.programs + Self.handlers).map { "usr/bin/" + $0 }
            expected += units.map { "usr/lib/systemd/user/" + $0 }
            expected += manifests.map { "usr/share/broadcastd/handlers/" + $0 }
            expected += Self.programs.flatMap { name in
                [
                    "usr/share/man/man1/\(name).1",
                    "usr/share/bash-completion/completions/\(name)",
                    "usr/share/zsh/site-functions/_\(name)",
                    "usr/share/fish/vendor_completions.d/\(name).fish",
                ]
            }
            #expect(files(under: destination) == expected.sorted())

            for name in Self.programs + Self.handlers {
                #expect(
                    FileManager.default.isExecutableFile(atPath: "\(destination)/usr/bin/\(name)"),
                    "\(name) is not executable")
            }
            // The units start broadcastd where it was installed.
            for unit in units {
                let text = try String(contentsOfFile: "\(destination)/usr/lib/systemd/user/\(unit)", encoding: .utf8)
                for line in text.split(separator: "\n") where line.hasPrefix("ExecStart") {
                    #expect(line.hasPrefix("ExecStart=/usr/bin/broadcastd"), "\(unit): \(line)")
                }
                #expect(
                    !text.contains("/usr/local/bin") && !text.contains(".local/bin"),
                    "\(unit) still names another broadcastd:\n\(text)")
            }
            #expect(
                try String(contentsOfFile: "\(destination)/usr/lib/systemd/user/broadcastd.service", encoding: .utf8)
                    .contains("ExecStart=/usr/bin/broadcastd"))
            // Completion scripts know the subcommands and options.
            let share = destination + "/usr/share"
            for (name, words) in [
                ("broadcastctl", Self.subcommands + ["--handler", "--watch"]),
                ("broadcastd", ["--output", "--pixel-format"]),
                ("broadcast-setup", ["--non-interactive"]),
            ] {
                for script in [
                    "\(share)/bash-completion/completions/\(name)", "\(share)/zsh/site-functions/_\(name)",
                    "\(share)/fish/vendor_completions.d/\(name).fish",
                ] {
                    let text = try String(contentsOfFile: script, encoding: .utf8)
                    let missing = words.filter {
                        !text.contains($0.hasPrefix("--") && script.hasSuffix(".fish") ? String($0.dropFirst(2)) : $0)
                    }
                    #expect(!text.isEmpty && missing.isEmpty, "\(script) does not mention \(missing)")
                }
            }
            // The manifests the daemon finds beside bin/ ($PREFIX/share/broadcastd/handlers) are the repository's.
            for manifest in manifests {
                #expect(
                    FileManager.default.contentsEqual(
                        atPath: "\(share)/broadcastd/handlers/\(manifest)",
                        andPath: "\(Paths.root)/share/broadcastd/handlers/\(manifest)"))
            }

            try make(["uninstall", "DESTDIR=" + destination, "PREFIX=/usr"])
            #expect(files(under: destination) == [], "left behind by uninstall")
        }

        /// Each man page renders without a warning and documents every option `--help` lists.
        @Test(arguments: programs) func manPage(_ name: String) throws {
            let page = "\(Paths.root)/docs/man/\(name).1"
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/man") else {
                Issue.record("man is not installed (apt-get install man-db groff-base, or run scripts/test.sh)")
                return
            }
            let rendered = try runTool("/usr/bin/man", ["--warnings", "-l", page], environment: ["MANWIDTH": "80"])
            #expect(rendered.status == 0)
            #expect(rendered.stderr.isEmpty, "man --warnings -l \(page):\n\(rendered.stderr)")
            #expect(
                rendered.stdout.contains("NAME") && rendered.stdout.contains("SYNOPSIS")
                    && rendered.stdout.contains("EXAMPLES"))

            let source = try String(contentsOfFile: page, encoding: .utf8)
            var helps = [try help([name])]
            if name == "broadcastctl" { helps += try Self.subcommands.map { try help([name, $0]) } }
            let options = Set(
                helps.flatMap { text in
                    text.split(separator: "\n").compactMap { line in
                        line.firstMatch(of: /^  (?:-\w, )?--([a-z0-9-]+)/).map { String($0.1) }
                    }
                })
            #expect(!options.isEmpty)
            // (Lists of what is missing, so that a failure does not print the whole page.)
            let undocumented = options.sorted().filter { !source.contains("Fl -\($0)") }
            #expect(undocumented.isEmpty, "docs/man/\(name).1 does not document \(undocumented.map { "--" + $0 })")
            if name == "broadcastctl" {
                let missing = Self.subcommands.filter { !source.contains("Cm \($0)") }
                #expect(missing.isEmpty, "docs/man/broadcastctl.1 does not describe \(missing)")
                let statuses = ["0", "1", "64", "69"].filter { !source.contains(".It \($0)\n") }
                #expect(statuses.isEmpty, "docs/man/broadcastctl.1 does not document exit status \(statuses)")
            }
        }

        /// `--help` output, wrapped at 100 columns.
        func help(_ command: [String]) throws -> String {
            let result = try runTool(
                Paths.binary(command[0]), Array(command.dropFirst()) + ["--help"],
                environment: ["COLUMNS": "100", "LINES": "50"])
            #expect(result.status == 0, "\(command) --help: \(result.stderr)")
            return result.stdout
        }

        static let helpCommands =
            [["broadcastd"], ["broadcastctl"], ["broadcast-setup"]] + subcommands.map { ["broadcastctl", $0] }

        /// Compares with Tests/fixtures/help/NAME.txt; `UPDATE_HELP=1 swift test --filter InstallTests` rewrites them.
        @Test(arguments: helpCommands) func helpText(_ command: [String]) throws {
            let text = try help(command)
            let fixture = "\(Paths.root)/Tests/fixtures/help/\(command.joined(separator: "-")).txt"
            if ProcessInfo.processInfo.environment["UPDATE_HELP"] == "1" {
                try FileManager.default.createDirectory(
                    atPath: Paths.root + "/Tests/fixtures/help", withIntermediateDirectories: true)
                try text.write(toFile: fixture, atomically: true, encoding: .utf8)
                return
            }
            let saved = try? String(contentsOfFile: fixture, encoding: .utf8)
            #expect(saved != nil, "\(fixture) is missing: UPDATE_HELP=1 swift test --filter InstallTests writes it")
            guard let saved, saved != text else { return }
            let old = saved.split(separator: "\n", omittingEmptySubsequences: false)
            let new = text.split(separator: "\n", omittingEmptySubsequences: false)
            let first = (0..<min(old.count, new.count)).first { old[$0] != new[$0] } ?? min(old.count, new.count)
            Issue.record(
                """
                \(command.joined(separator: " ")) --help differs from \(fixture) from line \(first + 1):
                saved: \(first < old.count ? old[first] : "(end)")
                now:   \(first < new.count ? new[first] : "(end)")
                If the change is meant, update the fixtures (UPDATE_HELP=1 swift test --filter InstallTests) and the man page.
                """)
        }
    }
}
