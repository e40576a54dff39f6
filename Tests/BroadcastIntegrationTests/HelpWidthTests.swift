import Foundation
import Testing

/// At 80 columns no example in `--help` or in the man pages is broken mid-command: every example
/// line (a command, or a piece of one continued with `\`) is one line of the rendered text, within 80 columns.
extension Integration {
    @Suite struct HelpWidthTests {
        static let width = 80
        /// swift-argument-parser wraps a line as long as the terminal is wide, so a help line has one column less.
        static let helpWidth = width - 1

        /// Every program, and every subcommand `broadcastctl --help` lists (so that new ones are checked too).
        static func helpCommands() throws -> [[String]] {
            let listing = try Self.help(["broadcastctl"], columns: 200)
            let lines = listing.split(separator: "\n", omittingEmptySubsequences: false)
            let subcommands = lines.drop { $0 != "SUBCOMMANDS:" }.dropFirst().prefix { !$0.isEmpty }
                .compactMap { $0.firstMatch(of: /^  ([a-z][a-z0-9-]*)\s/).map { String($0.1) } }
                .filter { $0 != "help" }
            #expect(subcommands.contains("start") && subcommands.contains("status"), "no subcommands in:\n\(listing)")
            return [["broadcastd"], ["broadcastctl"], ["broadcast-setup"]] + subcommands.map { ["broadcastctl", $0] }
        }

        static func help(_ command: [String], columns: Int) throws -> String {
            let result = try runTool(
                Paths.binary(command[0]), Array(command.dropFirst()) + ["--help"],
                environment: ["COLUMNS": String(columns), "LINES": "50"])
            #expect(result.status == 0, "\(command) --help: \(result.stderr)")
            return result.stdout
        }

        /// The examples of a help text: the indented lines of its discussion (between the overview and USAGE).
        static func examples(inHelp text: String) -> [Substring] {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            return lines.prefix { !$0.hasPrefix("USAGE:") }.filter {
                $0.hasPrefix(" ") && !$0.allSatisfy(\.isWhitespace)
            }
        }

        @Test func helpExamplesFitIn80Columns() throws {
            var broken: [String] = []
            for command in try Self.helpCommands() {
                // Laid out as written (no wrapping at 1000 columns), then as a terminal of 80 columns shows it.
                let examples = Self.examples(inHelp: try Self.help(command, columns: 1000))
                let narrow = Set(
                    try Self.help(command, columns: Self.width).split(separator: "\n", omittingEmptySubsequences: false)
                )
                for line in examples where line.count > Self.helpWidth || !narrow.contains(line) {
                    broken.append("\(command.joined(separator: " ")) --help: \(line.count) columns: \(line)")
                }
            }
            #expect(
                broken.isEmpty, "example lines that wrap at \(Self.width) columns:\n\(broken.joined(separator: "\n"))")
        }

        /// The example lines of a man page's source: `.Dl` lines and the lines of `.Bd -literal` displays, as rendered text.
        static func examples(inManPage source: String) -> [String] {
            var result: [String] = []
            var literal = false
            for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix(".Bd") {
                    literal = line.contains("-literal") || line.contains("-unfilled")
                    continue
                }
                if line.hasPrefix(".Ed") {
                    literal = false
                    continue
                }
                if line.hasPrefix(".Dl ") || line.hasPrefix(".D1 ") {
                    result.append(unescape(line.dropFirst(4)))
                } else if literal, !line.hasPrefix("."), !line.hasPrefix("'") {
                    result.append(unescape(line))
                }
            }
            return result.filter { !$0.allSatisfy(\.isWhitespace) }
        }

        static func unescape(_ text: Substring) -> String {
            String(text).replacing("\\-", with: "-").replacing("\\e", with: "\\").replacing("\\&", with: "")
                .replacing("\\(aq", with: "'").replacing("\\(dq", with: "\"")
        }

        @Test(arguments: InstallTests.programs) func manPageExamplesFitIn80Columns(_ name: String) throws {
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/man") else {
                Issue.record("man is not installed (apt-get install man-db groff-base, or run scripts/test.sh)")
                return
            }
            let page = "\(Paths.root)/docs/man/\(name).1"
            let rendered = try runTool("/usr/bin/man", ["-l", page], environment: ["MANWIDTH": String(Self.width)])
            #expect(rendered.status == 0, "man -l \(page): \(rendered.stderr)")
            // groff may render hyphens and quotes as Unicode; compare them as typed.
            let lines = rendered.stdout.replacing("\u{2010}", with: "-").replacing("\u{2212}", with: "-")
                .replacing("\u{2019}", with: "'").replacing("\u{2018}", with: "'")
                .split(separator: "\n", omittingEmptySubsequences: false)
            let examples = Self.examples(inManPage: try String(contentsOfFile: page, encoding: .utf8))
            #expect(!examples.isEmpty, "docs/man/\(name).1 has no examples (.Dl or .Bd -literal)")
            var broken: [String] = []
            for example in examples {
                let text = example.trimmingCharacters(in: .whitespaces)
                let line = lines.first { $0.trimmingCharacters(in: .whitespaces) == text }
                if line == nil || line!.count > Self.width {
                    broken.append(line.map { "\($0.count) columns: \($0)" } ?? "broken or missing: \(text)")
                }
            }
            #expect(broken.isEmpty, "docs/man/\(name).1 at \(Self.width) columns:\n\(broken.joined(separator: "\n"))")
        }

        /// Every line of every `--help` at 80 columns fits (a USAGE line of 245 columns broke mid-word), and the prose
        /// reads as paragraphs: no line ends where the next line's first word would still have fitted (text
        /// hard-wrapped at ~90 columns came out ragged).
        @Test func everyHelpFitsIn80ColumnsAndItsParagraphsAreNotRagged() throws {
            var problems: [String] = []
            for command in try Self.helpCommands() {
                let name = command.joined(separator: " ")
                let lines = try Self.help(command, columns: Self.width)
                    .split(separator: "\n", omittingEmptySubsequences: false)
                for line in lines where line.count > Self.width {
                    problems.append("\(name) --help: \(line.count) columns: \(line)")
                }
                let prose = lines.prefix { !$0.hasPrefix("USAGE:") }
                for (line, next) in zip(prose, prose.dropFirst())
                where !line.isEmpty && !line.hasPrefix(" ") && !next.hasPrefix(" ") {
                    if let word = next.split(separator: " ").first, line.count + 1 + word.count < Self.width {
                        problems.append("\(name) --help: ragged: '\(line)' / '\(next)'")
                    }
                }
            }
            #expect(problems.isEmpty, "\n\(problems.joined(separator: "\n"))")
        }

        /// Every rendered line of every man page is within 80 characters at MANWIDTH=80, in a UTF-8 locale and in C.
        @Test(arguments: InstallTests.programs) func manPagesFitIn80Columns(_ name: String) throws {
            let page = "\(Paths.root)/docs/man/\(name).1"
            for locale in ["C.UTF-8", "C"] {
                let rendered = try runTool(
                    "/usr/bin/man", ["-l", page],
                    environment: [
                        "MANWIDTH": String(Self.width),
                        "LC_ALL": locale,
                    ])
                #expect(rendered.status == 0, "man -l \(page): \(rendered.stderr)")
                let long = rendered.stdout.split(separator: "\n").filter { $0.count > Self.width }
                #expect(long.isEmpty, "docs/man/\(name).1 in \(locale):\n\(long.joined(separator: "\n"))")
            }
        }
    }
}
