import Keychain
import KeyshareCrypto

/// The public facts of a card's key read from bytes alone: CKA_MODULUS and
/// CKA_PUBLIC_EXPONENT, CKA_EC_PARAMS and CKA_EC_POINT, or a certificate's
/// SubjectPublicKeyInfo walked as DER.
///
/// Why not OpenSSL: the mirror runs inside whatever process loaded the
/// keyshare module, and that process may have changed OpenSSL's defaults.
/// `openssl -engine pkcs11` (and curl) call ENGINE_set_default(ALL), after
/// which building an EC public key from its point fails in that process; the
/// mirror then lost the card's EC key pair (no public material, so no
/// private-key proxy) and wrote that into the shared store. What a card's
/// items are must not depend on the state of the host's libraries, so this
/// file uses none.
struct CardPublicKey: Equatable {
    var keyType: UInt
    var modulus: [UInt8]?
    var exponent: [UInt8]?
    var ecParams: [UInt8]?
    /// The raw point (04||X||Y for the NIST curves), or the 32 raw bytes of an Ed25519 key.
    var point: [UInt8]?

    /// The bytes a card item's reference is derived from: n || 0 || e (no
    /// leading zeros) for RSA, the raw point for EC and Ed25519 keys. These
    /// are the bytes earlier versions computed through OpenSSL, so
    /// references made by them stay valid.
    var material: [UInt8]? {
        if keyType == CKK.rsa, let n = modulus, let e = exponent { return strip(n) + [0] + strip(e) }
        return point
    }

    /// CKA_EC_POINT: the point in a DER OCTET STRING.
    var ecPointDER: [UInt8]? {
        guard keyType == CKK.ec, let p = point else { return nil }
        return DER.encode(tag: 0x04, p)
    }

    /// CKA_MODULUS_BITS of an RSA key.
    var modulusBits: Int? {
        guard keyType == CKK.rsa, let n = modulus.map(strip), let first = n.first else { return nil }
        return (n.count - 1) * 8 + (8 - first.leadingZeroBitCount)
    }

    /// CKA_PUBLIC_KEY_INFO: the DER SubjectPublicKeyInfo, as OpenSSL would
    /// encode it for the same key (DER is canonical).
    var spki: [UInt8]? {
        switch keyType {
        case CKK.rsa:
            guard let n = modulus, let e = exponent else { return nil }
            let rsaKey = DER.sequence(DER.integer(strip(n)) + DER.integer(strip(e)))
            return DER.sequence(DER.sequence(DER.rsaEncryption + [0x05, 0x00]) + DER.encode(tag: 0x03, [0] + rsaKey))
        case CKK.ec:
            guard let params = ecParams, let p = point else { return nil }
            return DER.sequence(DER.sequence(DER.ecPublicKey + params) + DER.encode(tag: 0x03, [0] + p))
        case CKK.ecEdwards:
            guard let p = point, p.count == 32 else { return nil }
            return DER.sequence(DER.sequence(DER.ed25519) + DER.encode(tag: 0x03, [0] + p))
        default:
            return nil
        }
    }

    /// A public key object's attributes (CKA_MODULUS/CKA_PUBLIC_EXPONENT, or
    /// CKA_EC_PARAMS/CKA_EC_POINT with the point raw or in an OCTET STRING).
    init?(attributes a: AttributeMap) {
        if let n = a[CKA.modulus], let e = a[CKA.publicExponent], !n.isEmpty, !e.isEmpty {
            self.init(keyType: CKK.rsa, modulus: n, exponent: e)
            return
        }
        guard let params = a[CKA.ecParams], let q = a[CKA.ecPoint], !q.isEmpty else { return nil }
        if params == DER.ed25519 || params == ObjectTemplates.ed25519Params {
            let raw = q.count == 32 ? q : DER.octetString(q)
            guard let raw, raw.count == 32 else { return nil }
            self.init(keyType: CKK.ecEdwards, point: raw)
            return
        }
        guard let curve = ECCurve(paramsDER: params) else { return nil }
        let rawLen = 1 + 2 * curve.byteSize
        let raw: [UInt8]?
        if q.count == rawLen, q[0] == 0x04 { raw = q } else { raw = DER.octetString(q) }
        if let raw, raw.count == rawLen, raw[0] == 0x04 {
            self.init(keyType: CKK.ec, ecParams: params, point: raw)
            return
        }
        // A compressed point needs curve arithmetic to expand: OpenSSL, only
        // for this rare form (cards hand out uncompressed points).
        guard let k = try? PublicKey(ecParams: params, point: q), let expanded = k.ecPoint else { return nil }
        self.init(keyType: CKK.ec, ecParams: params, point: expanded)
    }

    /// The key of an X.509 certificate (DER), from its SubjectPublicKeyInfo.
    init?(certificate der: [UInt8]) {
        // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version?, serial,
        //   signature, issuer, validity, subject, subjectPublicKeyInfo, ... }, ... }
        var outer = DER.Reader(der)
        guard let cert = outer.element(tag: 0x30) else { return nil }
        var certReader = DER.Reader(cert)
        guard let tbsBytes = certReader.element(tag: 0x30) else { return nil }
        var tbs = DER.Reader(tbsBytes)
        if tbs.peekTag == 0xA0 { _ = tbs.any() }  // version
        for _ in 0..<5 { guard tbs.any() != nil else { return nil } }  // serial, signature, issuer, validity, subject
        guard let spki = tbs.element(tag: 0x30) else { return nil }
        self.init(spki: spki)
    }

    /// The contents of a SubjectPublicKeyInfo SEQUENCE.
    init?(spki contents: [UInt8]) {
        var r = DER.Reader(contents)
        guard let algorithm = r.element(tag: 0x30), let bits = r.element(tag: 0x03), bits.first == 0 else { return nil }
        let key = Array(bits.dropFirst())
        var alg = DER.Reader(algorithm)
        guard let oid = alg.element(tag: 0x06) else { return nil }
        switch DER.encode(tag: 0x06, oid) {
        case DER.rsaEncryption:
            var seq = DER.Reader(key)
            guard let body = seq.element(tag: 0x30) else { return nil }
            var ints = DER.Reader(body)
            guard let n = ints.element(tag: 0x02), let e = ints.element(tag: 0x02) else { return nil }
            self.init(keyType: CKK.rsa, modulus: strip(n), exponent: strip(e))
        case DER.ecPublicKey:
            guard let curveOID = alg.element(tag: 0x06) else { return nil }
            let params = DER.encode(tag: 0x06, curveOID)
            guard let curve = ECCurve(paramsDER: params), key.count == 1 + 2 * curve.byteSize, key.first == 0x04 else { return nil }
            self.init(keyType: CKK.ec, ecParams: params, point: key)
        case DER.ed25519:
            guard key.count == 32 else { return nil }
            self.init(keyType: CKK.ecEdwards, point: key)
        default:
            return nil
        }
    }

    init(keyType: UInt, modulus: [UInt8]? = nil, exponent: [UInt8]? = nil, ecParams: [UInt8]? = nil, point: [UInt8]? = nil) {
        self.keyType = keyType
        self.modulus = modulus
        self.exponent = exponent
        self.ecParams = ecParams
        self.point = point
    }
}

private func strip(_ b: [UInt8]) -> [UInt8] { Array(b.drop { $0 == 0 }) }

/// Just enough DER for SubjectPublicKeyInfo: definite lengths, single-byte tags.
enum DER {
    static let rsaEncryption: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
    static let ecPublicKey: [UInt8] = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    static let ed25519: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70]

    struct Reader {
        private let bytes: [UInt8]
        private var at = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var peekTag: UInt8? { at < bytes.count ? bytes[at] : nil }

        /// The next element's contents if its tag is `tag`.
        mutating func element(tag: UInt8) -> [UInt8]? {
            guard peekTag == tag else { return nil }
            return any()?.contents
        }

        /// The next element, whatever its tag.
        @discardableResult
        mutating func any() -> (tag: UInt8, contents: [UInt8])? {
            guard at + 2 <= bytes.count else { return nil }
            let tag = bytes[at]
            var i = at + 1
            var len = Int(bytes[i])
            i += 1
            if len >= 0x80 {
                let n = len & 0x7F
                guard n >= 1, n <= 3, i + n <= bytes.count else { return nil }
                len = 0
                for _ in 0..<n { len = len << 8 | Int(bytes[i]); i += 1 }
            }
            guard len <= bytes.count - i else { return nil }
            at = i + len
            return (tag, Array(bytes[i..<i + len]))
        }
    }

    static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        if n < 0x100 { return [0x81, UInt8(n)] }
        if n < 0x10000 { return [0x82, UInt8(n >> 8), UInt8(n & 0xFF)] }
        return [0x83, UInt8(n >> 16), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
    }

    static func encode(tag: UInt8, _ contents: [UInt8]) -> [UInt8] { [tag] + length(contents.count) + contents }
    static func sequence(_ contents: [UInt8]) -> [UInt8] { encode(tag: 0x30, contents) }

    /// A non-negative INTEGER from big-endian magnitude bytes (no leading zeros).
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        let m = magnitude.isEmpty ? [0] : magnitude
        return encode(tag: 0x02, m[0] & 0x80 != 0 ? [0] + m : m)
    }

    /// The contents of a whole-input OCTET STRING, or nil.
    static func octetString(_ b: [UInt8]) -> [UInt8]? {
        var r = Reader(b)
        guard let c = r.element(tag: 0x04), r.peekTag == nil else { return nil }
        return c
    }
}
