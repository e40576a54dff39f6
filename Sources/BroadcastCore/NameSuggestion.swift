/// "Did you mean …?" for a mistyped name: the known name within two edits (Levenshtein distance)
/// of what was typed. Used for configuration keys, subcommands and handler names.
public enum NameSuggestion {
    /// The known name closest to `name` within two edits, if there is one (the first of equals).
    public static func closest(to name: String, among names: [String]) -> String? {
        names.map { ($0, editDistance(Array(name), Array($0))) }.filter { $0.1 <= 2 }.min(by: { $0.1 < $1.1 })?.0
    }

    /// `; did you mean 'x'?` when a name is close, else "".
    public static func didYouMean(_ name: String, among names: [String]) -> String {
        closest(to: name, among: names).map { "; did you mean '\($0)'?" } ?? ""
    }

    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        var previous = Array(0...b.count)
        for (i, ca) in a.enumerated() {
            var current = [i + 1]
            for (j, cb) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (ca == cb ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}
