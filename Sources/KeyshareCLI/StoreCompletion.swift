import ArgumentParser
import Keychain

/// Shell completion of token labels and item names, answered by the CLI itself
/// (`keyshare ---completion ...`, which the generated bash, zsh and fish scripts
/// call) so it always matches the store's real contents and the parser's names.
///
/// It runs on every Tab press, so it reads the store as it is and nothing more:
/// only when a keychain.db already exists (no store or directory is created),
/// public metadata only (labels and persistent
/// references of items visible without a PIN; never a secret, never a PIN
/// prompt), no driver sync, no agent contacted or started. Every error ends
/// in an empty answer: a completion never prints a message.
enum StoreCompletion {
    /// `--token` and the commands' token arguments: token labels.
    static let tokens: CompletionKind = .custom { _, _, _ in tokenLabels() }

    /// Item arguments (show, delete, export, csr --key, share get): labels, and
    /// persistent references once the typed prefix matches no label.
    static let items: CompletionKind = .custom { words, _, prefix in itemNames(words: words, prefix: prefix) }

    static func tokenLabels() -> [String] {
        guard let store = openStore(), let tokens = try? store.tokens() else { return [] }
        return unique(tokens.map(\.label))
    }

    static func itemNames(words: [String], prefix: String) -> [String] {
        guard let store = openStore() else { return [] }
        var query = ItemQuery(limit: .all)
        if let wanted = tokenWord(in: words) {
            // Items of the token already named on the line (label or token ID), if it exists.
            guard let token = (try? store.tokens())?.first(where: { $0.label == wanted || $0.tokenID.description == wanted })
            else { return [] }
            query.tokenID = token.tokenID
        }
        guard let items = try? store.find(query, key: nil) else { return [] }
        let labels = unique(items.compactMap { $0.attributes.string(CKA.label) })
        if prefix.isEmpty || labels.contains(where: { $0.hasPrefix(prefix) }) { return labels }
        return unique(items.map(\.reference.base64url)).filter { $0.hasPrefix(prefix) }
    }

    /// The value of `--token X` or `--token=X` among the words typed so far.
    static func tokenWord(in words: [String]) -> String? {
        for (i, word) in words.enumerated() {
            if word == "--token", i + 1 < words.count, !words[i + 1].isEmpty { return words[i + 1] }
            if word.hasPrefix("--token=") { return String(word.dropFirst("--token=".count)) }
        }
        return nil
    }

    /// The user's store, or nil (none yet, unreadable, refused). Read-only when
    /// SQLite can read it so (its -shm index exists); a store whose index is
    /// gone (the last connection closed, or no agent has run since) opens as
    /// every command opens it, which recreates the index and writes nothing else.
    private static func openStore() -> KeychainStore? {
        guard KeychainStore.exists(home: nil) else { return nil }
        return (try? KeychainStore(home: nil, readOnly: true)) ?? (try? KeychainStore(home: nil))
    }

    /// Non-empty names, first occurrence kept; no name with a line break (one name per output line).
    private static func unique(_ names: [String]) -> [String] {
        var seen = Set<String>()
        return names.filter { !$0.isEmpty && !$0.contains("\n") && seen.insert($0).inserted }
    }
}
