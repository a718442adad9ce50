import Testing
@testable import KeyshareCrypto

/// TextSearch stands in for _StringProcessing's contains/firstRange in the module's layers (issue 28):
/// the same answers, ranges included.
@Suite struct TextSearchTests {
    @Test func findsWhatFirstRangeFinds() {
        let cases: [(String, String)] = [
            ("-----BEGIN CERTIFICATE-----\nMII", "-----BEGIN "), ("abc", "abc"), ("abc", "c"), ("aaab", "aab"),
            ("abc", "abcd"), ("", "a"), ("abc", ""), ("héllo wörld", "wö"), ("x: y", ":"), ("--- -----", "-----"),
        ]
        for (text, needle) in cases {
            #expect(text.textRange(of: needle) == text.firstRange(of: needle), "\(text) / \(needle)")
            #expect(text.containsText(needle) == text.contains(needle), "\(text) / \(needle)")
            let sub = text.dropFirst(0)
            #expect(sub.textRange(of: needle) == sub.firstRange(of: needle))
        }
    }
}
