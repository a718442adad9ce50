import Keychain

/// RFC 7512 URIs for tokens and objects, built from the same label and serial
/// the module reports in C_GetTokenInfo, so a URI copied from `keyshare list`
/// works verbatim with the OpenSSL engine, p11tool and pkcs11-tool.
enum PKCS11URI {
    static func token(_ t: TokenRecord) -> String {
        "pkcs11:" + tokenPath(t)
    }

    static func object(token t: TokenRecord, label: String?, id: [UInt8]?, type: String?) -> String {
        var parts = [tokenPath(t)]
        if let id, !id.isEmpty { parts.append("id=" + id.map { "%" + hex2($0) }.joined()) }
        if let label { parts.append("object=" + encode(label)) }
        if let type { parts.append("type=" + type) }
        return "pkcs11:" + parts.joined(separator: ";")
    }

    static func typeName(_ c: ItemClass) -> String? {
        switch c {
        case .certificate: "cert"
        case .privateKey: "private"
        case .publicKey: "public"
        case .secretKey: "secret-key"
        case .data: "data"
        default: nil
        }
    }

    private static func tokenPath(_ t: TokenRecord) -> String {
        "token=" + encode(t.label) + ";serial=" + encode(t.serial)
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters (and the
    /// few path characters RFC 7512 allows unencoded).
    static func encode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: ":"), UInt8(ascii: "["),
                 UInt8(ascii: "]"), UInt8(ascii: "@"), UInt8(ascii: "!"), UInt8(ascii: "$"),
                 UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
                 UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: "="):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out += "%" + hex2(b)
            }
        }
        return out
    }

    private static func hex2(_ b: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(b >> 4)], digits[Int(b & 0xF)]])
    }
}
