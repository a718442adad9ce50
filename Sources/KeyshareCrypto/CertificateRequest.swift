import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// PKCS #10 certificate requests whose signature comes from elsewhere: the
/// request is assembled by OpenSSL (X509_REQ: subject, public key, the
/// extension request), its to-be-signed bytes are handed to `sign`, which in
/// keyshare is the token's key behind the KeyShare signing API, and the
/// signature is put back. The private key never has to be an OpenSSL object
/// here, so a key that cannot leave its token can still enrol.
public enum CertificateRequest {
    /// A SubjectAltName entry of a request. `upn` is Microsoft's User
    /// Principal Name: otherName 1.3.6.1.4.1.311.20.2.3 holding a UTF8String,
    /// what smart-card logon and PIV derived credentials carry.
    public enum AltName: Sendable, Equatable {
        case email(String)
        case dns(String)
        case uri(String)
        case upn(String)
        case ip([UInt8])

        /// `email:`, `dns:`, `uri:`, `upn:` or `ip:` followed by the value (case-insensitive prefix).
        public init(argument: String) throws {
            guard let colon = argument.firstIndex(of: ":") else {
                throw CryptoError(.invalidInput, "subject alternative name \(argument)",
                                  reason: "write TYPE:VALUE with TYPE email, dns, uri, upn or ip")
            }
            let kind = argument[..<colon].lowercased()
            let value = String(argument[argument.index(after: colon)...])
            guard !value.isEmpty else {
                throw CryptoError(.invalidInput, "subject alternative name \(argument)", reason: "the value is empty")
            }
            switch kind {
            case "email", "rfc822": self = .email(value)
            case "dns": self = .dns(value)
            case "uri": self = .uri(value)
            case "upn": self = .upn(value)
            case "ip":
                guard let bytes = AltName.address(value) else {
                    throw CryptoError(.invalidInput, "subject alternative name \(argument)", reason: "not an IPv4 or IPv6 address")
                }
                self = .ip(bytes)
            default:
                throw CryptoError(.invalidInput, "subject alternative name \(argument)",
                                  reason: "unknown type \(kind): use email, dns, uri, upn or ip")
            }
        }

        static func address(_ s: String) -> [UInt8]? {
            var v4 = in_addr()
            if inet_pton(AF_INET, s, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
            var v6 = in6_addr()
            if inet_pton(AF_INET6, s, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
            return nil
        }
    }

    /// `/CN=Alice/O=Example\/Inc` (the form `openssl req -subj` takes) as
    /// ordered (attribute, value) pairs. `\` escapes the next character.
    public static func parseSubject(_ s: String) throws -> [(String, String)] {
        guard s.hasPrefix("/") else {
            throw CryptoError(.invalidInput, "subject \(s)", reason: "write it as /CN=name/O=organisation (the openssl req -subj form)")
        }
        var parts: [String] = []
        var current = ""
        var escaped = false
        for ch in s.dropFirst() {
            if escaped { current.append(ch); escaped = false; continue }
            if ch == "\\" { escaped = true; continue }
            if ch == "/" { parts.append(current); current = ""; continue }
            current.append(ch)
        }
        parts.append(current)
        var out: [(String, String)] = []
        for p in parts where !p.isEmpty {
            guard let eq = p.firstIndex(of: "="), eq != p.startIndex else {
                throw CryptoError(.invalidInput, "subject \(s)", reason: "\(p) is not ATTRIBUTE=value")
            }
            out.append((String(p[..<eq]), String(p[p.index(after: eq)...])))
        }
        guard !out.isEmpty else { throw CryptoError(.invalidInput, "subject \(s)", reason: "the subject is empty") }
        return out
    }

    /// The X.509 signature algorithm a request signed by `key` uses:
    /// SHA-256 with RSA PKCS #1 v1.5, ECDSA with the hash that fits the
    /// curve (SHA-256/384/512), Ed25519 and Ed448 (pure). nil for the
    /// key-agreement keys (X25519, X448), which sign nothing.
    public static func signatureAlgorithm(for key: PublicKey) -> SignatureAlgorithm? {
        switch key.keyType {
        case .rsa: .rsaPKCS1(.sha256)
        case .ec:
            switch key.curve {
            case .p384: .ecdsa(.sha384)
            case .p521: .ecdsa(.sha512)
            default: .ecdsa(.sha256)
            }
        case .ed25519: .ed25519
        case .ed448: .ed448
        case .mlDSA: .mlDSA
        case .slhDSA: .slhDSA
        case .x25519, .x448, .mlKEM: nil
        }
    }

    /// Builds and signs a request. `sign` receives the DER
    /// CertificationRequestInfo and `algorithm`, and returns the signature
    /// as PKCS #11 gives it (ECDSA as raw r||s; converted to DER here). The
    /// finished request is verified with `publicKey` before it is returned,
    /// so a signer holding another key is an error, not a bad file.
    public static func build(subject: [(String, String)], altNames: [AltName], publicKey: PublicKey,
                             sign: ([UInt8], SignatureAlgorithm) throws -> [UInt8]) throws -> [UInt8] {
        CryptoError.clearQueue()
        guard let req = X509_REQ_new() else { throw CryptoError.openssl("certificate request") }
        defer { X509_REQ_free(req) }
        guard X509_REQ_set_version(req, 0) == 1 else { throw CryptoError.openssl("certificate request version") }
        try setSubject(req, subject)
        guard X509_REQ_set_pubkey(req, publicKey.pkey) == 1 else { throw CryptoError.openssl("certificate request public key") }
        if !altNames.isEmpty { try addAltNames(req, altNames) }

        guard let algorithm = signatureAlgorithm(for: publicKey) else {
            throw CryptoError(.unsupported, "certificate request", reason: "an X25519, X448 or ML-KEM key cannot sign a request")
        }
        let tbs = try OSSL.i2d("certificate request info") { i2d_re_X509_REQ_tbs(req, $0) }
        var signature = try sign(tbs, algorithm)
        if case .ecdsa = algorithm, let curve = publicKey.curve {
            guard let der = try ECDSASignature.derFromRaw(signature, curve: curve) else {
                throw CryptoError(.invalidInput, "certificate request signature", reason: "the ECDSA signature has the wrong length")
            }
            signature = der
        }
        try setSignature(req, signature, algorithm: algorithm, keyType: publicKey.keyType)
        let der = try OSSL.i2d("certificate request encode") { i2d_X509_REQ(req, $0) }
        guard try verify(der) else {
            throw CryptoError(.verificationFailed, "certificate request",
                              reason: "the signature does not verify with the request's public key (the signer holds another key)")
        }
        return der
    }

    /// True when the request's self-signature verifies with its own public key.
    public static func verify(_ der: [UInt8]) throws -> Bool {
        CryptoError.clearQueue()
        guard let (req, _) = OSSL.d2i(der, { p, n in d2i_X509_REQ(nil, p, n) }) else {
            throw CryptoError.openssl("certificate request decode", kind: .invalidInput)
        }
        defer { X509_REQ_free(req) }
        guard let pk = X509_REQ_get0_pubkey(req) else { throw CryptoError.openssl("certificate request public key") }
        let ok = X509_REQ_verify(req, pk) == 1
        CryptoError.clearQueue()
        return ok
    }

    /// The SubjectPublicKeyInfo (DER) of a request's public key.
    public static func publicKeyInfo(_ der: [UInt8]) throws -> [UInt8] {
        CryptoError.clearQueue()
        guard let (req, _) = OSSL.d2i(der, { p, n in d2i_X509_REQ(nil, p, n) }) else {
            throw CryptoError.openssl("certificate request decode", kind: .invalidInput)
        }
        defer { X509_REQ_free(req) }
        guard let pk = X509_REQ_get0_pubkey(req) else { throw CryptoError.openssl("certificate request public key") }
        return try PKeyInfo.spkiDER(pk)
    }

    /// PEM text of a DER request (`-----BEGIN CERTIFICATE REQUEST-----`).
    public static func pem(_ der: [UInt8]) throws -> String {
        guard let (req, _) = OSSL.d2i(der, { p, n in d2i_X509_REQ(nil, p, n) }) else {
            throw CryptoError.openssl("certificate request decode", kind: .invalidInput)
        }
        defer { X509_REQ_free(req) }
        let bytes = try OSSL.collectBIO("certificate request PEM") { PEM_write_bio_X509_REQ($0, req) == 1 }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func setSubject(_ req: OpaquePointer, _ subject: [(String, String)]) throws {
        guard let name = X509_NAME_new() else { throw CryptoError.openssl("subject") }
        defer { X509_NAME_free(name) }
        for (field, value) in subject {
            let bytes = Array(value.utf8)
            let ok = bytes.withUnsafeBufferPointer {
                X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, $0.baseAddress, Int32($0.count), -1, 0)
            }
            guard ok == 1 else {
                let e = CryptoError.openssl("subject attribute \(field)", kind: .invalidInput)
                throw CryptoError(.invalidInput, "subject attribute \(field)=\(value)",
                                  reason: "not accepted (\(e.reason)); use attributes such as CN, O, OU, C, L, ST, emailAddress, UID, DC")
            }
        }
        guard X509_REQ_set_subject_name(req, name) == 1 else { throw CryptoError.openssl("subject") }
    }

    /// One subjectAltName extension in the request's extensionRequest attribute.
    private static func addAltNames(_ req: OpaquePointer, _ names: [AltName]) throws {
        guard let gens = OPENSSL_sk_new_null() else { throw CryptoError.openssl("subject alternative names") }
        defer { ks_GENERAL_NAMES_free(gens) }
        for n in names {
            guard let gen = GENERAL_NAME_new() else { throw CryptoError.openssl("subject alternative name") }
            do {
                try fill(gen, n)
            } catch {
                GENERAL_NAME_free(gen)
                throw error
            }
            guard OPENSSL_sk_push(gens, gen) > 0 else {
                GENERAL_NAME_free(gen)
                throw CryptoError.openssl("subject alternative names")
            }
        }
        guard let ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, UnsafeMutableRawPointer(gens)) else {
            throw CryptoError.openssl("subjectAltName extension")
        }
        defer { X509_EXTENSION_free(ext) }
        guard let exts = OPENSSL_sk_new_null() else { throw CryptoError.openssl("extension request") }
        defer { OPENSSL_sk_free(exts) }
        guard OPENSSL_sk_push(exts, UnsafeRawPointer(ext)) > 0, X509_REQ_add_extensions(req, exts) == 1 else {
            throw CryptoError.openssl("extension request")
        }
    }

    private static func fill(_ gen: UnsafeMutablePointer<GENERAL_NAME>, _ n: AltName) throws {
        func string(_ make: () -> UnsafeMutablePointer<ASN1_STRING>?, _ bytes: [UInt8]) throws -> UnsafeMutablePointer<ASN1_STRING> {
            guard let s = make() else { throw CryptoError.openssl("subject alternative name") }
            guard ASN1_STRING_set(s, bytes, Int32(bytes.count)) == 1 else {
                ASN1_STRING_free(s)
                throw CryptoError.openssl("subject alternative name")
            }
            return s
        }
        switch n {
        case .email(let v): GENERAL_NAME_set0_value(gen, GEN_EMAIL, try string(ASN1_IA5STRING_new, Array(v.utf8)))
        case .dns(let v): GENERAL_NAME_set0_value(gen, GEN_DNS, try string(ASN1_IA5STRING_new, Array(v.utf8)))
        case .uri(let v): GENERAL_NAME_set0_value(gen, GEN_URI, try string(ASN1_IA5STRING_new, Array(v.utf8)))
        case .ip(let b): GENERAL_NAME_set0_value(gen, GEN_IPADD, try string(ASN1_OCTET_STRING_new, b))
        case .upn(let v):
            let utf8 = try string(ASN1_UTF8STRING_new, Array(v.utf8))
            guard let value = ASN1_TYPE_new() else {
                ASN1_STRING_free(utf8)
                throw CryptoError.openssl("UPN value")
            }
            ASN1_TYPE_set(value, V_ASN1_UTF8STRING, utf8)
            guard let oid = OBJ_txt2obj(GeneralName.upnOID, 1) else {
                ASN1_TYPE_free(value)
                throw CryptoError.openssl("UPN type")
            }
            guard GENERAL_NAME_set0_othername(gen, oid, value) == 1 else {
                ASN1_OBJECT_free(oid)
                ASN1_TYPE_free(value)
                throw CryptoError.openssl("UPN")
            }
        }
    }

    /// The signatureAlgorithm AlgorithmIdentifier and the BIT STRING, as
    /// X509_REQ_sign would have set them.
    private static func setSignature(_ req: OpaquePointer, _ signature: [UInt8], algorithm: SignatureAlgorithm,
                                     keyType: KeyType) throws {
        let nid: Int32
        var ptype = V_ASN1_UNDEF
        switch algorithm {
        case .rsaPKCS1(.sha256?): nid = NID_sha256WithRSAEncryption; ptype = V_ASN1_NULL
        case .ecdsa(.sha256?): nid = NID_ecdsa_with_SHA256
        case .ecdsa(.sha384?): nid = NID_ecdsa_with_SHA384
        case .ecdsa(.sha512?): nid = NID_ecdsa_with_SHA512
        case .ed25519: nid = NID_ED25519
        case .ed448: nid = NID_ED448
        case .mlDSA, .slhDSA:
            // The OID names the parameter set (id-ml-dsa-65, id-slh-dsa-sha2-128s: RFC 9881, RFC 9909),
            // parameters absent; OpenSSL 3.5 knows them by their long names ("ML-DSA-65"), 3.0 does not.
            guard let name = keyType.postQuantumName, case let n = OBJ_txt2nid(name), n != NID_undef else {
                throw CryptoError(.unsupported, "certificate request", reason: "no X.509 signature algorithm for \(keyType)")
            }
            nid = n
        default: throw CryptoError(.unsupported, "certificate request", reason: "no X.509 signature algorithm for \(algorithm)")
        }
        guard let alg = X509_ALGOR_new() else { throw CryptoError.openssl("signature algorithm") }
        defer { X509_ALGOR_free(alg) }
        guard X509_ALGOR_set0(alg, OBJ_nid2obj(nid), ptype, nil) == 1,
              X509_REQ_set1_signature_algo(req, alg) == 1 else {
            throw CryptoError.openssl("signature algorithm")
        }
        guard let bits = ASN1_BIT_STRING_new() else { throw CryptoError.openssl("signature") }
        var sig = signature
        let set = sig.withUnsafeMutableBufferPointer { ASN1_BIT_STRING_set(bits, $0.baseAddress, Int32($0.count)) }
        guard set == 1 else {
            ASN1_BIT_STRING_free(bits)
            throw CryptoError.openssl("signature")
        }
        // A signature is whole bytes: no unused bits (what X509_REQ_sign records).
        bits.pointee.flags &= ~0x07
        bits.pointee.flags |= Int(ASN1_STRING_FLAG_BITS_LEFT)
        X509_REQ_set0_signature(req, bits)
    }
}
