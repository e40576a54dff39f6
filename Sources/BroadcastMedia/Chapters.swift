import BroadcastHandlerKit
import BroadcastProtocol

/// Chapters from `mark` commands, as `record` and `replay` write them (libavformat's chapters, MP4 and Matroska).
package enum Chapters {
    /// Longest title, in bytes (UTF-8), and most marks in a recording (or a replay buffer): a result lists them
    /// all and must stay within its 64 KiB (100 titles of 200 bytes take about 25 KiB of it).
    package static let maxTitleBytes = 200
    package static let maxMarks = 100

    /// A mark at file time `time` (ns), titled by the command's `text`, else "Mark N" after `count` marks so far;
    /// refused when `kept` marks are kept already or the title is too long (broadcastd refuses control characters).
    package static func mark(at time: Int64, text: JSONValue?, count: Int, kept: Int? = nil) throws(HandlerError)
        -> (time: Int64, title: String)
    {
        guard (kept ?? count) < maxMarks else {
            throw HandlerError("mark", "there are \(maxMarks) marks already, the most a recording takes")
        }
        var title = "Mark \(count + 1)"
        if case .string(let given)? = text, !given.isEmpty {
            guard given.utf8.count <= maxTitleBytes else {
                throw HandlerError("mark", "a title of \(given.utf8.count) bytes is longer than \(maxTitleBytes)")
            }
            title = given
        }
        return (time, title)
    }

    /// Each mark a chapter until the next one, the last until `end`; before the first, one titled "Start" (MP4's
    /// chapters cover the whole file: without it, the first mark's chapter would start at 0).
    package static func spans(_ marks: [(time: Int64, title: String)], end: Int64) -> [(
        start: Int64, end: Int64, title: String
    )] {
        var sorted = marks.sorted { $0.time < $1.time }
        if let first = sorted.first, first.time > 0 { sorted.insert((0, "Start"), at: 0) }
        return sorted.enumerated().map { index, mark in
            (mark.time, index + 1 < sorted.count ? sorted[index + 1].time : max(end, mark.time), mark.title)
        }
    }

    /// The answer to `mark`.
    package static func describe(_ mark: (time: Int64, title: String), number: Int) -> [String: JSONValue] {
        [
            "time": .number((Double(mark.time) / 1e6).rounded() / 1000), "title": .string(mark.title),
            "chapter": .number(Double(number)),
        ]
    }
}
