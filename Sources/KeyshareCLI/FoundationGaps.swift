import FoundationEssentials
import Glibc

// What the CLI took from Foundation and FoundationEssentials does not have. The CLI imports
// FoundationEssentials only: Foundation would link FoundationInternationalization and ICU's
// data (some 45 MB of the 69 MB binary, issue 28) for a few string helpers and Process.

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (Foundation's `.whitespaces`, for ASCII text).
    func trimmingBlanks() -> String { trimming { $0 == " " || $0 == "\t" } }

    /// Without leading and trailing characters that are in `set`.
    func trimming(charactersIn set: String) -> String { trimming { set.contains($0) } }

    func trimming(where drop: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !drop($0) }), let last = lastIndex(where: { !drop($0) }) else { return "" }
        return String(self[first...last])
    }

    /// Padded with spaces on the right to `width` characters (never cut).
    func padded(to width: Int) -> String {
        count >= width ? String(self) : String(self) + String(repeating: " ", count: width - count)
    }
}

/// Hexadecimal digits as the CLI prints them (String(format:) is Foundation's).
enum Hex {
    static let digits = Array("0123456789ABCDEF")

    /// Two upper-case digits per byte: "0A1B".
    static func upper<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        var s = ""
        for b in bytes { s.append(digits[Int(b >> 4)]); s.append(digits[Int(b & 0xF)]) }
        return s
    }

    /// Two lower-case digits per byte: "0a1b" (TPM Names, as tpm2-tools prints them).
    static func lower<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        upper(bytes).lowercased()
    }

    /// "0x%08lX": at least eight upper-case digits, for PKCS #11 numbers without a name.
    static func constant(_ n: UInt) -> String {
        let text = String(n, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 8 - text.count)) + text
    }
}

/// Zero-padded decimal ("%02d", "%04d").
func zeroPadded(_ n: some BinaryInteger, _ width: Int) -> String {
    let text = String(n)
    return String(repeating: "0", count: max(0, width - text.count)) + text
}

/// Path strings as NSString handled them.
enum PathString {
    /// "/a/b/c" → "/a/b"; "c" → ""; "/c" → "/".
    static func directory(_ path: String) -> String {
        var p = Substring(path)
        while p.count > 1, p.last == "/" { p = p.dropLast() }
        guard let slash = p.lastIndex(of: "/") else { return "" }
        let dir = p[..<slash]
        return dir.isEmpty ? "/" : String(dir)
    }

    /// "/a/b/c" → "c" (trailing slashes ignored).
    static func lastComponent(_ path: String) -> String {
        var p = Substring(path)
        while p.count > 1, p.last == "/" { p = p.dropLast() }
        guard let slash = p.lastIndex(of: "/"), p != "/" else { return String(p) }
        return String(p[p.index(after: slash)...])
    }

    /// "~" and "~/..." expanded, "." and empty components dropped, ".." applied to what precedes
    /// it (lexically, as NSString's standardizingPath does for paths that do not exist yet).
    static func standardized(_ path: String) -> String {
        var p = path
        if p == "~" || p.hasPrefix("~/") { p = homeDirectory() + p.dropFirst() }
        let absolute = p.hasPrefix("/")
        var parts: [Substring] = []
        for c in p.split(separator: "/", omittingEmptySubsequences: true) {
            if c == "." { continue }
            if c == "..", let last = parts.last, last != ".." { parts.removeLast(); continue }
            if c == "..", absolute { continue }
            parts.append(c)
        }
        let joined = parts.joined(separator: "/")
        return absolute ? "/" + joined : (joined.isEmpty ? "." : joined)
    }
}

/// $HOME when it is absolute, else the password database's entry (NSHomeDirectory's rule).
func homeDirectory() -> String {
    if let h = getenv("HOME").map({ String(cString: $0) }), h.hasPrefix("/") { return h }
    var pwd = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buf = [CChar](repeating: 0, count: 4096)
    if getpwuid_r(getuid(), &pwd, &buf, buf.count, &result) == 0, let r = result, let dir = r.pointee.pw_dir {
        return String(cString: dir)
    }
    return "/"
}

/// Standard output and error as byte streams (FileHandle is Foundation's).
enum StandardStream {
    /// Writes everything (short writes and EINTR retried); false when the stream is closed (EPIPE).
    @discardableResult
    static func write(_ bytes: some Collection<UInt8>, to fd: Int32 = STDOUT_FILENO) -> Bool {
        Array(bytes).withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                done += n
            }
            return true
        }
    }

    static func write(_ text: String, to fd: Int32 = STDOUT_FILENO) {
        write(Array(text.utf8), to: fd)
    }

    /// Standard input to its end (nil on a read error, or past `limit` bytes when one is given).
    static func readInput(limit: Int = .max) -> [UInt8]? {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { return out }
            out += buf.prefix(n)
            if out.count > limit { return nil }
        }
    }
}
