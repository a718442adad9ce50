#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto
import KeyshareTPM
import Tokens

/// Private keys of TPM tokens (docs/tpm.md): the object holds the TPM blob,
/// and signing and RSA decryption run in the TPM, with the key's
/// authorization derived from the logged-in token key. Each operation opens
/// the TPM, loads the key under the storage root key, uses it and flushes both.
extension Runtime {
    /// A TPM token is present for this process when its TPM can be reached
    /// (looked at most every 2 s; in agent mode only the agent looks).
    func tpmReachable() -> Bool {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let now = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        if let p = lock.withLock({ external.tpmProbe }), now - p.at < 2 { return p.reachable }
        let ok = TPM.canConnect(store.tpmSite())
        lock.withLock { external.tpmProbe = (now, ok) }
        return ok
    }

    func tpmAuth(_ token: TokenID) throws -> [UInt8] {
        guard let login = login(for: token) else { throw PKCS11Error.userNotLoggedIn }
        return try login.key.tpmObjectAuth()
    }

    func tpmSignOperation(_ s: Session, _ view: ObjectView, blob: [UInt8], _ m: Mechanism) throws -> any SignOperation {
        let auth = try tpmAuth(s.tokenID)
        let pub = try TPM.publicKey(ofBlob: blob)
        let scheme: TPMSignOperation.Scheme
        var digest: DigestAlgorithm?
        // Matched on the key's kind, not on the TPMPublicKey enum (whose payload-less patterns are easy to get wrong).
        let rsa = pub.kind.isRSA
        switch m {
        case .ecdsa where !rsa: scheme = .ecdsa
        case .ecdsaWith(let d) where !rsa: scheme = .ecdsa; digest = d
        case .rsaPKCS where rsa: scheme = .pkcs1(nil)
        case .rsaPKCSWith(let d) where rsa: scheme = .pkcs1(d); digest = d
        case .rsaPSS(let p) where rsa: scheme = .pss(p)
        case .rsaPSSWith(let d, let p) where rsa:
            guard p.hash == d else { throw PKCS11Error.mechanismParamInvalid }
            scheme = .pss(p); digest = d
        case .rsaX509 where rsa: scheme = .raw
        case .ecdsa, .ecdsaWith, .rsaPKCS, .rsaPKCSWith, .rsaPSS, .rsaPSSWith, .rsaX509:
            throw PKCS11Error.keyTypeInconsistent
        default:
            throw PKCS11Error.mechanismInvalid
        }
        return TPMSignOperation(tcti: store.tpmSite(), blob: blob, auth: auth, key: pub, scheme: scheme,
                                digest: try digest.map { try DigestContext($0) })
    }

    func tpmDecryptOperation(_ view: ObjectView, blob: [UInt8], _ m: Mechanism) throws -> any CipherOperation {
        let auth = try tpmAuth(view.entry.tokenID)
        guard case .rsa(let kind, _, _) = try TPM.publicKey(ofBlob: blob) else { throw PKCS11Error.keyTypeInconsistent }
        let scheme: TPMDecryptScheme
        switch m {
        case .rsaPKCS: scheme = .pkcs1
        case .rsaX509: scheme = .raw
        case .rsaOAEP(let o):
            // The TPM's OAEP uses one hash for both the label and MGF1, and no label here.
            guard o.hash == o.mgf1, o.label.isEmpty, let alg = Self.tpmHash(o.hash) else { throw PKCS11Error.mechanismParamInvalid }
            scheme = .oaep(hashAlgorithm: alg)
        default: throw PKCS11Error.mechanismInvalid
        }
        return TPMDecryptOperation(tcti: store.tpmSite(), blob: blob, auth: auth, scheme: scheme, size: kind.size)
    }

    static func tpmHash(_ d: DigestAlgorithm) -> UInt16? {
        switch d {
        case .sha1: 0x0004
        case .sha256: 0x000B
        case .sha384: 0x000C
        case .sha512: 0x000D
        default: nil
        }
    }

    /// TPM errors as PKCS #11 return values.
    static func tpmCall<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as TPMError {
            throw tpmError(e)
        }
    }

    /// No TPM: the token went away; a blob of another TPM: the key is not usable here.
    static func tpmError(_ e: TPMError) -> PKCS11Error {
        switch e.kind {
        case .unreachable: PKCS11Error(CKR_DEVICE_REMOVED)
        case .lockout: PKCS11Error(CKR_PIN_LOCKED)
        case .authFailed: PKCS11Error(CKR_USER_NOT_LOGGED_IN)
        case .foreignObject: PKCS11Error(CKR_KEY_HANDLE_INVALID)
        default: PKCS11Error(CKR_DEVICE_ERROR)
        }
    }
}

final class TPMSignOperation: SignOperation {
    enum Scheme {
        case ecdsa
        case pkcs1(DigestAlgorithm?)
        case pss(PSSParameters)
        case raw
    }

    let tcti: TPMSite
    let blob: [UInt8]
    let auth: [UInt8]
    let key: TPMPublicKey
    let scheme: Scheme
    let digest: DigestContext?
    private var input: [UInt8] = []

    init(tcti: TPMSite, blob: [UInt8], auth: [UInt8], key: TPMPublicKey, scheme: Scheme, digest: DigestContext?) {
        (self.tcti, self.blob, self.auth, self.key, self.scheme, self.digest) = (tcti, blob, auth, key, scheme, digest)
    }

    var signatureLength: Int {
        switch key {
        case .ec(let k, _, _): 2 * k.size
        case .rsa(let k, _, _): k.size
        }
    }

    func update(_ part: [UInt8]) throws {
        if let digest { return try digest.update(part) }
        guard input.count + part.count <= 1 << 16 else { throw PKCS11Error.dataLenRange }
        input += part
    }

    func finish() throws -> [UInt8] {
        let data = try digest?.finish() ?? input
        let size = key.kind.size
        switch scheme {
        case .ecdsa:
            guard !data.isEmpty else { throw PKCS11Error.dataLenRange }
            let d = TPM.ecdsaInput(data, curveSize: size)
            return try Runtime.tpmCall { try TPM.with(tcti) { try $0.signECDSA(blob: blob, auth: auth, digest: d) } }
        case .pkcs1(let d):
            let t = try d.map { try RSASignaturePadding.digestInfo(data, $0) } ?? data
            guard t.count + 11 <= size else { throw PKCS11Error.dataLenRange }
            return try raw(try RSASignaturePadding.pkcs1(t, modulusBytes: size))
        case .pss(let p):
            guard data.count == p.hash.outputSize else { throw PKCS11Error.dataLenRange }
            let em: [UInt8]
            do {
                em = try RSASignaturePadding.pss(digest: data, hash: p.hash, mgf1: p.mgf1, saltLength: p.saltLength,
                                                 modulusBits: 8 * size)
            } catch {
                throw PKCS11Error.mechanismParamInvalid
            }
            return try raw(em)
        case .raw:
            guard data.count <= size else { throw PKCS11Error.dataLenRange }
            let block = [UInt8](repeating: 0, count: size - data.count) + data
            guard case .rsa(_, let n, _) = key, block.lexicographicallyPrecedes(n) else { throw PKCS11Error(CKR_DATA_INVALID) }
            return try raw(block)
        }
    }

    private func raw(_ block: [UInt8]) throws -> [UInt8] {
        let out = try Runtime.tpmCall { try TPM.with(tcti) { try $0.rsaDecrypt(blob: blob, auth: auth, scheme: .raw, input: block) } }
        return [UInt8](repeating: 0, count: max(0, key.kind.size - out.count)) + out
    }
}

/// RSA decryption in the TPM: one block, so updates only collect.
final class TPMDecryptOperation: CipherOperation {
    let tcti: TPMSite
    let blob: [UInt8]
    let auth: [UInt8]
    let scheme: TPMDecryptScheme
    let size: Int
    private var input: [UInt8] = []

    init(tcti: TPMSite, blob: [UInt8], auth: [UInt8], scheme: TPMDecryptScheme, size: Int) {
        (self.tcti, self.blob, self.auth, self.scheme, self.size) = (tcti, blob, auth, scheme, size)
    }

    func outputLength(input: Int) -> Int { size }
    func updateOutputLength(input: Int) -> Int { 0 }
    var finalOutputLength: Int { size }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        guard data.count == size else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        do {
            let out = try TPM.with(tcti) { try $0.rsaDecrypt(blob: blob, auth: auth, scheme: scheme, input: data) }
            if case .raw = scheme { return [UInt8](repeating: 0, count: max(0, size - out.count)) + out }
            return out
        } catch let e as TPMError where e.kind == .other || e.kind == .unsupported {
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)  // bad padding, as a soft key answers
        } catch let e as TPMError {
            throw Runtime.tpmError(e)
        }
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        guard input.count + part.count <= 1 << 16 else { throw PKCS11Error(CKR_ENCRYPTED_DATA_LEN_RANGE) }
        input += part
        return []
    }

    func finish() throws -> [UInt8] { try oneShot(input) }
}

extension ObjectView {
    /// The TPM blob of a TPM token's private key.
    var tpmBlob: [UInt8]? { attributes[CKA.keyshareTPM] }
}
