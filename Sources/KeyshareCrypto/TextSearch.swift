/// Substring search with the standard library alone. `contains(_:)` and `firstRange(of:)` on
/// strings come from _StringProcessing, and one call links its whole regex engine (0.95 MB:
/// its protocol conformances are kept by the linker) into the module, which otherwise needs
/// none of it (issue 28). The layers the module links use these instead.
extension StringProtocol {
    /// The first range of `needle`, compared character by character (as firstRange(of:) does).
    public func textRange(of needle: some StringProtocol) -> Range<Index>? {
        guard let first = needle.first else { return startIndex..<startIndex }
        var from = startIndex
        while let hit = self[from...].firstIndex(of: first) {
            if self[hit...].hasPrefix(needle) { return hit..<index(hit, offsetBy: needle.count) }
            from = index(after: hit)
        }
        return nil
    }

    /// Whether `needle` occurs; false for an empty needle, as contains(_:) answers.
    public func containsText(_ needle: some StringProtocol) -> Bool { !needle.isEmpty && textRange(of: needle) != nil }
}
