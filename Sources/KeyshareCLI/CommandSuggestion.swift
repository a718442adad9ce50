import ArgumentParser

/// What the CLI says instead of the argument parser's first line for two
/// common slips (issue 28): a mistyped subcommand ("2 unexpected arguments:
/// 'tokn', 'list'") gets the closest command name, and a secret-source option
/// given the secret itself (`--pin-source 1234`) gets the forms it takes,
/// without repeating the value (it may be the PIN).
enum CommandSuggestion {
    /// For a parser error, a better line, or nil to keep the parser's.
    static func line(for message: String, arguments: [String]) -> String? {
        if let option = invalidSourceOption(message) {
            return "\(option) \(SecretSource.accepted)"
        }
        if message.lowercased().contains("unexpected argument") {
            return unknownCommand(arguments)
        }
        return nil
    }

    /// `--xyz-source` from "The value '…' is invalid for '--xyz-source <…>'".
    static func invalidSourceOption(_ message: String) -> String? {
        guard message.contains("is invalid for '--"), let start = message.firstRange(of: "is invalid for '")?.upperBound else { return nil }
        let option = message[start...].prefix { $0 != " " && $0 != "'" }
        return option.hasSuffix("-source") ? String(option) : nil
    }

    /// Walks the words before the first option through the command tree; the
    /// first that is no subcommand where one is expected gets a suggestion.
    static func unknownCommand(_ arguments: [String]) -> String? {
        var command: ParsableCommand.Type = Keyshare.self
        var path = ["keyshare"]
        for word in arguments {
            if word.hasPrefix("-") { return nil }
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty else { return nil }
            if let next = subcommands.first(where: { $0._commandName == word || $0.configuration.aliases.contains(word) }) {
                command = next
                path.append(word)
                continue
            }
            let names = subcommands.map { $0._commandName }
            let here = path.joined(separator: " ")
            if let best = closest(word, names) {
                return "'\(word)' is not a \(here) command; did you mean '\(here) \(best)'? (see '\(here) --help')"
            }
            return "'\(word)' is not a \(here) command; the commands are: \(names.joined(separator: ", ")) (see '\(here) --help')"
        }
        return nil
    }

    /// The name nearest to `word` by edit distance, if near enough to be a
    /// slip (at most a third of the word, at least 1, at most 3), or the only
    /// name that `word` is a prefix of.
    static func closest(_ word: String, _ names: [String]) -> String? {
        let w = word.lowercased()
        let prefixed = names.filter { $0.hasPrefix(w) }
        if prefixed.count == 1 { return prefixed[0] }
        let scored = names.map { (name: $0, d: distance(w, $0)) }.sorted { ($0.d, $0.name) < ($1.d, $1.name) }
        guard let best = scored.first, best.d <= min(3, max(1, w.count / 3)) else { return nil }
        if scored.count > 1, scored[1].d == best.d { return nil }
        return best.name
    }

    /// Damerau-Levenshtein distance (optimal string alignment): a swap of
    /// two neighbours ("tokne") counts one edit, as typing slips go.
    static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a), y = Array(b)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: y.count + 1), count: x.count + 1)
        for i in 0...x.count { d[i][0] = i }
        for j in 0...y.count { d[0][j] = j }
        for i in 1...x.count {
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[x.count][y.count]
    }
}
