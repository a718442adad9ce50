#if canImport(Glibc)
import Glibc
#endif

/// The published vectors in Tests/Fixtures/vectors (see its README.md),
/// read without Foundation.
enum VectorFiles {
    static var directory: String {
        // .../Tests/PKCS11Tests/VectorFiles.swift -> .../Tests/Fixtures/vectors
        var parts = String(#filePath).split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(2)
        return parts.joined(separator: "/") + "/Fixtures/vectors"
    }

    static func text(_ name: String) -> String {
        guard let f = fopen(directory + "/" + name, "r") else { return "" }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            bytes += buf[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Records of `name = value` lines, separated by blank lines. `[A=B]`
    /// (or `[A = B]`) lines set a group value carried into the records that
    /// follow, as in CAVP .rsp files. Comments (#) and tab-indented
    /// intermediate values are skipped. With `startKey`, a record starts at
    /// that key instead and blank lines do not end one (RFC 5869's file has
    /// blank lines inside its cases).
    static func records(_ name: String, startKey: String? = nil) -> [[String: String]] {
        var out: [[String: String]] = []
        var group: [String: String] = [:]
        var current: [String: String] = [:]
        func flush() {
            if !current.isEmpty { out.append(group.merging(current) { _, new in new }) }
            current = [:]
        }
        // "\r\n" is one Character in Swift: split on any newline.
        for raw in text(name).split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = String(raw)
            if line.hasPrefix("#") || line.hasPrefix("\t") { continue }
            let trimmed = line.trimmingSpaces
            if trimmed.isEmpty {
                if startKey == nil { flush() }
                continue
            }
            if trimmed.hasPrefix("["), trimmed.hasSuffix("]") {
                flush()
                let inner = trimmed.dropFirst().dropLast()
                if let eq = inner.firstIndex(of: "=") {
                    group[String(inner[..<eq]).trimmingSpaces] = String(inner[inner.index(after: eq)...]).trimmingSpaces
                }
                continue
            }
            if let eq = trimmed.firstIndex(of: "=") {
                let k = String(trimmed[..<eq]).trimmingSpaces
                let v = String(trimmed[trimmed.index(after: eq)...]).trimmingSpaces
                if k == startKey { flush() }
                current[k] = v
            }
        }
        flush()
        return out
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return String(s)
    }
}

func hexBytes(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var hi: UInt8?
    for c in s.utf8 {
        let v: UInt8
        switch c {
        case 48...57: v = c - 48
        case 97...102: v = c - 87
        case 65...70: v = c - 55
        default: continue
        }
        if let h = hi {
            out.append(h << 4 | v)
            hi = nil
        } else {
            hi = v
        }
    }
    return out
}

func hexString(_ b: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(b.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
}
