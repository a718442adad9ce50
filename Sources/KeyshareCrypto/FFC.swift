import COpenSSL

/// Finite-field DSA (FIPS 186-4) and Diffie-Hellman (PKCS #3, SP 800-56A)
/// over raw domain parameters and values, for CKK_DSA / CKK_DH objects:
/// PKCS #11 keeps these keys as their components (CKA_PRIME, CKA_SUBPRIME,
/// CKA_BASE, CKA_VALUE), so nothing here goes through PKCS #8. Both are
/// legacy families: offered for old peers; keyshare makes none by itself.
/// Every EVP_PKEY is built for one call and freed.
public enum FFC {
    public enum Kind: Sendable { case dsa, dh }

    /// p, g and (for DSA, and DH parameters generated FIPS 186-4 style) q, big-endian.
    public struct Domain: Sendable, Equatable {
        public var p: [UInt8]
        public var q: [UInt8]?
        public var g: [UInt8]
        public init(p: [UInt8], q: [UInt8]?, g: [UInt8]) {
            self.p = Self.trim(p)
            self.q = q.map(Self.trim)
            self.g = Self.trim(g)
        }
        static func trim(_ b: [UInt8]) -> [UInt8] { Array(b.drop { $0 == 0 }) }
        public var primeBits: Int { p.isEmpty ? 0 : (p.count - 1) * 8 + (8 - p[0].leadingZeroBitCount) }
        public var subprimeBytes: Int { q?.count ?? 0 }
    }

    static func name(_ k: Kind) -> String { k == .dsa ? "DSA" : "DH" }

    /// New domain parameters: DSA (L, N) per FIPS 186-4 A.1.1.2 / A.2.3, DH
    /// as FIPS 186-4 (p, q, g) too (a safe prime of 2048 bits takes minutes,
    /// this seconds); PKCS #3 uses p and g.
    public static func generateDomain(_ kind: Kind, primeBits: Int, subprimeBits: Int?) throws -> Domain {
        CryptoError.clearQueue()
        // DH parameters come from OpenSSL's X9.42 key manager ("DHX"): OpenSSL
        // 3.0's "DH" generates only safe primes ("generator" type, minutes for
        // 2048 bits); q is dropped for a PKCS #3 domain by the caller.
        guard let ctx = EVP_PKEY_CTX_new_from_name(CryptoEngine.context, kind == .dsa ? "DSA" : "DHX", nil) else {
            throw CryptoError.openssl("FFC parameters")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_paramgen_init(ctx) == 1 else { throw CryptoError.openssl("FFC parameters") }
        var pbits = UInt(primeBits), qbits = UInt(subprimeBits ?? (primeBits >= 2048 ? 256 : 160))
        let params = [
            OSSL_PARAM_construct_size_t(cString("pbits"), &pbits),
            OSSL_PARAM_construct_size_t(cString("qbits"), &qbits),
            OSSL_PARAM_construct_end(),
        ]
        let ok = EVP_PKEY_CTX_set_params(ctx, params)
        var key: OpaquePointer? = nil
        guard ok == 1, EVP_PKEY_generate(ctx, &key) == 1, let key else {
            throw CryptoError.openssl("FFC parameter generation", kind: .invalidInput)
        }
        defer { EVP_PKEY_free(key) }
        guard let p = PKeyInfo.bnParam(key, "p"), let g = PKeyInfo.bnParam(key, "g") else {
            throw CryptoError.openssl("FFC parameters")
        }
        return Domain(p: p, q: PKeyInfo.bnParam(key, "q"), g: g)
    }

    /// A key pair in `domain`: (x, y). `privateBits` (DH's CKA_VALUE_BITS) sets x's length.
    public static func generateKey(_ kind: Kind, _ domain: Domain, privateBits: Int? = nil) throws -> (x: [UInt8], y: [UInt8]) {
        let params = try pkey(kind, domain, x: nil, y: nil)
        defer { EVP_PKEY_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, params, nil) else { throw CryptoError.openssl("FFC key") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw CryptoError.openssl("FFC key") }
        if let privateBits {
            var n = Int32(privateBits)
            let params = [OSSL_PARAM_construct_int(cString("priv_len"), &n), OSSL_PARAM_construct_end()]
            guard EVP_PKEY_CTX_set_params(ctx, params) == 1 else { throw CryptoError.openssl("FFC key", kind: .invalidInput) }
        }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_generate(ctx, &key) == 1, let key else { throw CryptoError.openssl("FFC key", kind: .invalidInput) }
        defer { EVP_PKEY_free(key) }
        guard let x = PKeyInfo.bnParam(key, "priv"), let y = PKeyInfo.bnParam(key, "pub") else {
            throw CryptoError.openssl("FFC key")
        }
        return (x, y)
    }

    /// g^x mod p: the public value of a private key given without it.
    public static func publicValue(_ domain: Domain, x: [UInt8]) throws -> [UInt8] {
        guard let ctx = BN_CTX_new() else { throw CryptoError.openssl("FFC public value") }
        defer { BN_CTX_free(ctx) }
        let p = try OSSL.bignum(domain.p), g = try OSSL.bignum(domain.g), e = try OSSL.bignum(x)
        defer { BN_free(p); BN_free(g); BN_clear_free(e) }
        guard let y = BN_new() else { throw CryptoError.openssl("FFC public value") }
        defer { BN_free(y) }
        BN_set_flags(e, Int32(BN_FLG_CONSTTIME))
        guard BN_mod_exp(y, g, e, p, ctx) == 1 else { throw CryptoError.openssl("FFC public value") }
        return OSSL.bytes(of: y)
    }

    /// Checks the domain and, when given, the key values the way OpenSSL's
    /// key import does (and, for a private key, that y = g^x mod p).
    public static func validate(_ kind: Kind, _ domain: Domain, x: [UInt8]?, y: [UInt8]?) throws {
        let key = try pkey(kind, domain, x: x, y: y)
        defer { EVP_PKEY_free(key) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, key, nil) else { throw CryptoError.openssl("FFC check") }
        defer { EVP_PKEY_CTX_free(ctx) }
        let ok: Bool
        if x != nil { ok = EVP_PKEY_pairwise_check(ctx) == 1 || (y == nil) }
        else if y != nil { ok = EVP_PKEY_public_check(ctx) == 1 }
        else { ok = EVP_PKEY_param_check_quick(ctx) == 1 }
        CryptoError.clearQueue()
        guard ok else { throw CryptoError(.invalidInput, "\(name(kind)) key", reason: "inconsistent key values") }
    }

    /// A DSA signature r || s (each half the size of q) of `digest`
    /// (FIPS 186-4 §4.6: the leftmost N bits of the digest are used).
    public static func dsaSign(_ domain: Domain, x: [UInt8], digest: [UInt8]) throws -> [UInt8] {
        guard let q = domain.q else { throw CryptoError(.invalidInput, "DSA sign", reason: "no subprime") }
        let y = try publicValue(domain, x: x)
        let key = try pkey(.dsa, domain, x: x, y: y)
        defer { EVP_PKEY_free(key) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, key, nil) else { throw CryptoError.openssl("DSA sign") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var len = Int(EVP_PKEY_get_size(key))
        var sig = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_sign_init(ctx) == 1, EVP_PKEY_sign(ctx, &sig, &len, digest, digest.count) == 1 else {
            throw CryptoError.openssl("DSA sign")
        }
        return try DERSignature.raw(sig[0..<len], width: q.count)
    }

    /// False for a signature that does not verify, of any length.
    public static func dsaVerify(_ domain: Domain, y: [UInt8], digest: [UInt8], signature: [UInt8]) throws -> Bool {
        guard let q = domain.q, signature.count == 2 * q.count else { return false }
        guard let der = try DERSignature.der(signature, width: q.count) else { return false }
        let key = try pkey(.dsa, domain, x: nil, y: y)
        defer { EVP_PKEY_free(key) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, key, nil) else { throw CryptoError.openssl("DSA verify") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_verify_init(ctx) == 1 else { throw CryptoError.openssl("DSA verify") }
        let r = EVP_PKEY_verify(ctx, der, der.count, digest, digest.count)
        CryptoError.clearQueue()
        return r == 1
    }

    /// The DH shared secret Z = peer^x mod p, left-padded to the size of p
    /// (SP 800-56A §5.7.1.1). The peer's value is checked (1 < y < p - 1,
    /// and in the q-order subgroup when q is known) by OpenSSL.
    public static func dhDerive(_ domain: Domain, x: [UInt8], peer: [UInt8]) throws -> [UInt8] {
        let mine = try pkey(.dh, domain, x: x, y: try publicValue(domain, x: x))
        defer { EVP_PKEY_free(mine) }
        let other = try pkey(.dh, domain, x: nil, y: peer)
        defer { EVP_PKEY_free(other) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(CryptoEngine.context, mine, nil) else { throw CryptoError.openssl("DH derive") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pad: UInt32 = 1
        let params = [OSSL_PARAM_construct_uint(cString("pad"), &pad), OSSL_PARAM_construct_end()]
        var len = domain.p.count
        var out = [UInt8](repeating: 0, count: len)
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_CTX_set_params(ctx, params) == 1,
              EVP_PKEY_derive_set_peer(ctx, other) == 1, EVP_PKEY_derive(ctx, &out, &len) == 1 else {
            throw CryptoError.openssl("DH derive", kind: .invalidInput)
        }
        return Array(out[0..<len])
    }

    /// An EVP_PKEY of the domain with x and/or y (parameters only when neither).
    static func pkey(_ kind: Kind, _ d: Domain, x: [UInt8]?, y: [UInt8]?) throws -> OpaquePointer {
        let b = try ParamBuilder()
        var bns: [OpaquePointer] = []
        defer { for n in bns { BN_clear_free(n) } }
        func push(_ name: String, _ v: [UInt8]) throws {
            let n = try OSSL.bignum(v)
            bns.append(n)
            b.bn(name, n)
        }
        try push("p", d.p)
        if let q = d.q { try push("q", q) }
        try push("g", d.g)
        if let y { try push("pub", y) }
        if let x { try push("priv", x) }
        // EVP_PKEY_KEY_PARAMETERS is 0x84 (openssl/evp.h); the others come through the shim.
        let selection = x != nil ? ks_EVP_PKEY_KEYPAIR() : y != nil ? ks_EVP_PKEY_PUBLIC_KEY() : 0x84
        return try b.makeKey(name(kind), selection: selection, "\(name(kind)) key")
    }
}

/// DER Dss-Sig-Value / ECDSA-Sig-Value (SEQUENCE of two INTEGERs) and the
/// PKCS #11 r || s form, for any width.
enum DERSignature {
    static func raw(_ der: ArraySlice<UInt8>, width: Int) throws -> [UInt8] {
        func fail(_ why: String) -> CryptoError { CryptoError(.openssl, "signature", reason: why) }
        var reader = DERReader(der)
        guard let body = reader.element(tag: 0x30), reader.atEnd else { throw fail("not a DER SEQUENCE") }
        var fields = DERReader(body)
        guard let r = fields.element(tag: 0x02), let s = fields.element(tag: 0x02), fields.atEnd else {
            throw fail("not two INTEGERs")
        }
        var out = [UInt8](repeating: 0, count: 2 * width)
        for (i, n) in [r, s].enumerated() {
            let digits = n.drop { $0 == 0 }
            guard let lead = n.first, lead & 0x80 == 0, digits.count <= width else { throw fail("component out of range") }
            let end = (i + 1) * width
            out.replaceSubrange(end - digits.count..<end, with: digits)
        }
        return out
    }

    static func der(_ raw: [UInt8], width: Int) throws -> [UInt8]? {
        guard raw.count == 2 * width else { return nil }
        func integer(_ b: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(b.drop { $0 == 0 })
            if v.isEmpty { v = [0] }
            if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02] + length(v.count) + v
        }
        func length(_ n: Int) -> [UInt8] {
            n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
        }
        let body = integer(raw[0..<width]) + integer(raw[width...])
        return [0x30] + length(body.count) + body
    }
}
