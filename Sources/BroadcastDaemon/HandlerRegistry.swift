import BroadcastCore
import BroadcastSystem
import FoundationEssentials
import Logging

/// The installed handlers: one manifest file (`NAME.json`) per handler, read from a list of directories
/// in order; the first manifest with a given name wins, so a user's own directory overrides the system's.
struct HandlerRegistry {
    struct Entry {
        var manifest: HandlerManifest
        var file: String
    }

    let directories: [String]

    /// The default search path: `$XDG_DATA_HOME/broadcastd/handlers`, then each of `$XDG_DATA_DIRS`,
    /// then `share/broadcastd/handlers` beside the directory broadcastd is installed in.
    static func defaultDirectories() -> [String] {
        var result: [String] = []
        let home = Environment.get("HOME") ?? ""
        let dataHome = Environment.get("XDG_DATA_HOME").flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.local/share"
        result.append(dataHome + "/broadcastd/handlers")
        let dataDirs =
            Environment.get("XDG_DATA_DIRS").flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        result += dataDirs.split(separator: ":").map { $0 + "/broadcastd/handlers" }
        if let exe = FileSystem.currentExecutable() {
            let prefix = exe.split(separator: "/").dropLast(2).joined(separator: "/")
            result.append("/" + prefix + "/share/broadcastd/handlers")
        }
        var seen = Set<String>()
        return result.filter { seen.insert($0).inserted }
    }

    /// Reads every manifest now (so handlers installed while the daemon runs show up). Broken
    /// manifests are skipped with a warning naming the file.
    func load(logger: Logger) -> [Entry] {
        var entries: [Entry] = []
        for directory in directories {
            for file in FileSystem.list(directory) ?? [] where file.hasSuffix(".json") {
                let path = directory + "/" + file
                do {
                    let manifest = try Self.parse(path: path)
                    if !entries.contains(where: { $0.manifest.name == manifest.name }) {
                        entries.append(Entry(manifest: manifest, file: path))
                    }
                } catch {
                    logger.warning("skipping handler manifest \(path): \(error)")
                }
            }
        }
        return entries
    }

    /// The handler folders that exist but cannot be read now (out of descriptors, no permission), with why:
    /// what START says when it finds no handler, instead of "none are installed".
    func unreadableDirectories() -> [String] {
        directories.compactMap { (directory: String) -> String? in
            do throws(SystemError) { _ = try FileSystem.listing(directory) } catch {
                return error.isNoSuchFolder ? nil : "\(directory) (\(error.reason))"
            }
            return nil
        }
    }

    /// The largest manifest read (docs/protocol.md §6).
    static let manifestLimit = 64 * 1024

    static func parse(path: String) throws(DaemonError) -> HandlerManifest {
        let bytes: [UInt8]
        // Never a plain open: a FIFO there would block the daemon until someone wrote to it.
        do { bytes = try FileSystem.readRegularFile(path, limit: manifestLimit) } catch {
            throw DaemonError("read \(path)", error.reason + "; a manifest is a regular file of at most 64 KiB")
        }
        let manifest: HandlerManifest
        do {
            manifest = try JSONDecoder().decode(HandlerManifest.self, from: Data(bytes))
        } catch DecodingError.keyNotFound(let key, let context) {
            throw DaemonError(
                "parse \(path)",
                "missing field '\((context.codingPath + [key]).map(\.stringValue).joined(separator: "."))'")
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            throw DaemonError(
                "parse \(path)",
                "field '\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type")
        } catch {
            throw DaemonError("parse \(path)", "not valid JSON")
        }
        guard !manifest.name.isEmpty, manifest.name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        else {
            throw DaemonError("parse \(path)", "handler name '\(manifest.name)' must be letters, digits, '-' or '_'")
        }
        return manifest
    }

    /// The program a manifest names: an absolute path; a relative path with a slash, from the manifest's
    /// directory; or a bare name, next to broadcastd first and then on PATH.
    static func resolveExecutable(_ entry: Entry) -> String? {
        let exec = entry.manifest.exec
        if exec.hasPrefix("/") { return FileSystem.isExecutable(exec) ? exec : nil }
        if exec.contains("/") {
            let directory = String(entry.file[..<(entry.file.lastIndex(of: "/") ?? entry.file.startIndex)])
            let path = directory + "/" + exec
            return FileSystem.isExecutable(path) ? path : nil
        }
        return FileSystem.findProgram(exec)
    }
}
