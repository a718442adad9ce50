import COpenSSL

/// What a chain must be valid for. `ssl` adds the TLS server purpose and,
/// when a host is given, the RFC 6125 name check (SAN dNSName/iPAddress).
public enum TrustPolicy: Sendable, Equatable {
    case basic
    case ssl(host: String?)
}

/// Why a chain is not trusted, in the keychain's vocabulary. Each is a
/// *recoverable* failure: the user (or a later date, or a missing file) can
/// fix it, so it is reported rather than treated as an attack.
public enum TrustFailureReason: String, Sendable, Equatable, CaseIterable {
    case expired = "expired"
    case notYetValid = "not yet valid"
    case hostnameMismatch = "hostname mismatch"
    case missingIntermediate = "missing intermediate"
    case untrustedRoot = "untrusted root"
    case wrongPurpose = "wrong purpose"
}

/// The SecTrustResultType counterpart.
public enum TrustResult: Sendable, Equatable {
    /// Valid to an anchor the user chose (keychain CKA_TRUSTED or an explicit file).
    case proceed
    /// Valid to a system anchor: trusted by default, not by an explicit choice.
    case unspecified
    case recoverableTrustFailure([TrustFailureReason])
    /// The chain is cryptographically or structurally wrong (bad signature,
    /// CA constraints violated, revoked): no setting makes it acceptable.
    case fatalTrustFailure(String)
    /// The inputs could not be evaluated at all (not a certificate, internal error).
    case invalid(String)

    /// The one-word verdict the CLI prints and the tests compare.
    public var verdict: String {
        switch self {
        case .proceed: "proceed"
        case .unspecified: "unspecified"
        case .recoverableTrustFailure: "recoverable"
        case .fatalTrustFailure: "fatal"
        case .invalid: "invalid"
        }
    }

    public var isTrusted: Bool { self == .proceed || self == .unspecified }
}

/// Where anchors come from besides the explicit list.
public enum TrustAnchorSource: Sendable, Equatable {
    /// Only `anchors` are trusted.
    case explicit
    /// The explicit anchors plus the system's hashed directory (e.g. /etc/ssl/certs).
    case system(directory: String)
}

public struct TrustEvaluation: Sendable {
    public var result: TrustResult
    /// The chain OpenSSL built, leaf first (as far as it got on failure).
    public var chain: [Certificate]
    /// OpenSSL's own text for each problem, for diagnostics ("certificate has expired").
    public var details: [String]

    public init(result: TrustResult, chain: [Certificate], details: [String]) {
        self.result = result
        self.chain = chain
        self.details = details
    }
}

/// SecTrustEvaluateWithError over X509_STORE / X509_verify_cert. Every error
/// is collected (the verify callback continues past each) so the caller gets
/// all reasons at once, as Apple's trust result does, not only the first.
public enum TrustEvaluator {
    public static func evaluate(leaf: Certificate, intermediates: [Certificate], anchors: [Certificate],
                                anchorSource: TrustAnchorSource = .explicit, policy: TrustPolicy = .basic,
                                at time: Int64? = nil) -> TrustEvaluation {
        do {
            return try run(leaf: leaf, intermediates: intermediates, anchors: anchors, anchorSource: anchorSource,
                           policy: policy, time: time)
        } catch {
            return TrustEvaluation(result: .invalid(String(describing: error)), chain: [], details: [])
        }
    }

    /// Error codes and their depth, filled by the verify callback.
    private final class Recorder {
        var errors: [(code: Int32, depth: Int32)] = []
    }

    private static let callback: @convention(c) (Int32, OpaquePointer?) -> Int32 = { ok, ctx in
        guard ok == 0, let ctx, let raw = X509_STORE_CTX_get_ex_data(ctx, 0) else { return ok }
        let recorder = Unmanaged<Recorder>.fromOpaque(raw).takeUnretainedValue()
        recorder.errors.append((X509_STORE_CTX_get_error(ctx), X509_STORE_CTX_get_error_depth(ctx)))
        return 1
    }

    private static func x509(_ c: Certificate) throws -> OpaquePointer {
        guard let (x, _) = OSSL.d2i(c.der, OSSL.decodeX509) else {
            throw CryptoError.openssl("certificate decode", kind: .invalidInput)
        }
        return x
    }

    private static func run(leaf: Certificate, intermediates: [Certificate], anchors: [Certificate],
                            anchorSource: TrustAnchorSource, policy: TrustPolicy, time: Int64?) throws -> TrustEvaluation {
        CryptoError.clearQueue()
        guard let store = X509_STORE_new() else { throw CryptoError.openssl("trust store") }
        defer { X509_STORE_free(store) }
        for a in anchors {
            let x = try x509(a)
            defer { X509_free(x) }
            // A duplicate anchor is not an error.
            _ = X509_STORE_add_cert(store, x)
        }
        if case .system(let dir) = anchorSource {
            guard X509_STORE_load_path(store, dir) == 1 else { throw CryptoError.openssl("system anchors \(dir)") }
        }
        CryptoError.clearQueue()
        guard let untrusted = ks_sk_X509_new_null() else { throw CryptoError.openssl("trust chain") }
        defer { ks_sk_X509_pop_free(untrusted) }
        for c in intermediates where c != leaf {
            let x = try x509(c)
            guard ks_sk_X509_push(untrusted, x) > 0 else { X509_free(x); throw CryptoError.openssl("trust chain") }
        }
        let leafX = try x509(leaf)
        defer { X509_free(leafX) }
        guard let ctx = X509_STORE_CTX_new_ex(CryptoEngine.context, nil) else { throw CryptoError.openssl("trust context") }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leafX, untrusted) == 1 else { throw CryptoError.openssl("trust context") }
        let param = X509_STORE_CTX_get0_param(ctx)
        if let time { X509_VERIFY_PARAM_set_time(param, time_t(time)) }
        if case .ssl(let host) = policy {
            X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER)
            if let host, !host.isEmpty {
                guard X509_VERIFY_PARAM_set1_host(param, host, 0) == 1 else { throw CryptoError.openssl("trust host name") }
            }
        }
        let recorder = Recorder()
        X509_STORE_CTX_set_ex_data(ctx, 0, Unmanaged.passUnretained(recorder).toOpaque())
        X509_STORE_CTX_set_verify_cb(ctx, callback)
        let rc = withExtendedLifetime(recorder) { X509_verify_cert(ctx) }
        let chain = builtChain(ctx)
        CryptoError.clearQueue()
        if rc < 0 { return TrustEvaluation(result: .invalid("chain building failed"), chain: chain, details: []) }
        if rc == 0 && recorder.errors.isEmpty {
            let code = X509_STORE_CTX_get_error(ctx)
            recorder.errors.append((code, X509_STORE_CTX_get_error_depth(ctx)))
        }
        return classify(recorder.errors, chain: chain, anchors: anchors)
    }

    private static func builtChain(_ ctx: OpaquePointer) -> [Certificate] {
        guard let stack = X509_STORE_CTX_get0_chain(ctx) else { return [] }
        var out: [Certificate] = []
        for i in 0..<ks_sk_X509_num(stack) {
            guard let x = ks_sk_X509_value(stack, i),
                  let der = try? OSSL.i2d("chain encode", { i2d_X509(x, $0) }),
                  let c = try? Certificate(der: der) else { continue }
            out.append(c)
        }
        return out
    }

    /// Maps X509_V_ERR_* codes onto the keychain's result kinds. Anything not
    /// known to be recoverable is fatal: unknown must never mean trusted.
    private static func classify(_ errors: [(code: Int32, depth: Int32)], chain: [Certificate],
                                 anchors: [Certificate]) -> TrustEvaluation {
        var reasons: [TrustFailureReason] = []
        var fatal: [String] = []
        var details: [String] = []
        func add(_ r: TrustFailureReason) { if !reasons.contains(r) { reasons.append(r) } }
        for (code, _) in errors {
            let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
            if !details.contains(text) { details.append(text) }
            switch code {
            case X509_V_ERR_CERT_HAS_EXPIRED: add(.expired)
            case X509_V_ERR_CERT_NOT_YET_VALID: add(.notYetValid)
            case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: add(.hostnameMismatch)
            case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
                 X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
                // The chain stops at a certificate that is not self-issued: a link is missing.
                if let last = chain.last, last.subjectDER == last.issuerDER { add(.untrustedRoot) } else { add(.missingIntermediate) }
            case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_CERT_UNTRUSTED:
                add(.untrustedRoot)
            case X509_V_ERR_INVALID_PURPOSE: add(.wrongPurpose)
            default: fatal.append(text)
            }
        }
        let result: TrustResult
        if !fatal.isEmpty {
            result = .fatalTrustFailure(fatal.joined(separator: "; "))
        } else if !reasons.isEmpty {
            result = .recoverableTrustFailure(reasons)
        } else if let root = chain.last, anchors.contains(root) {
            result = .proceed
        } else {
            result = .unspecified
        }
        return TrustEvaluation(result: result, chain: chain, details: details)
    }
}
