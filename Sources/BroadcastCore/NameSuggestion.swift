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

    /// Edits from `a` to `b`: insertions, deletions, substitutions, and swaps of two neighbours ("fsp" is one
    /// edit from "fps", so that it is not taken for "app", two substitutions away).
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in stride(from: 1, through: a.count, by: 1) {
            for j in stride(from: 1, through: b.count, by: 1) {
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
