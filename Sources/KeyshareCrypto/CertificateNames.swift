import COpenSSL

/// Subject fields read for display names (a default label is the
/// certificate's commonName, else its email: people read those).
extension Certificate {
    /// The value of the last entry of `nid` in a name, as UTF-8; nil when the
    /// name has none, or it is empty or not convertible. Control characters
    /// are dropped: the value ends up in labels, tables and prompts.
    static func lastEntry(_ name: OpaquePointer, nid: Int32) -> String? {
        var pos: Int32 = -1, last: Int32 = -1
        while true {
            pos = X509_NAME_get_index_by_NID(name, nid, pos)
            if pos < 0 { break }
            last = pos
        }
        guard last >= 0, let entry = X509_NAME_get_entry(name, last), let data = X509_NAME_ENTRY_get_data(entry) else {
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let n = ASN1_STRING_to_UTF8(&out, data)
        guard n > 0, let out else {
            CryptoError.clearQueue()
            return nil
        }
        defer { ks_OPENSSL_free(out) }
        let text = String(decoding: UnsafeBufferPointer(start: out, count: Int(n)), as: UTF8.self)
        let clean = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.properties.generalCategory != .control }))
        let trimmed = clean.trimmingSpaces
        return trimmed.isEmpty ? nil : trimmed
    }
}

private extension String {
    /// Without leading and trailing spaces (no Foundation on the module side).
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return String(s)
    }
}
