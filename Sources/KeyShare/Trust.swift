import Keychain
import KeyshareCrypto
import Tokens

/// Where trust evaluation finds its anchors (SecTrustSetAnchorCertificates).
public enum AnchorChoice: Sendable, Equatable {
    /// The keychain's certificates marked trusted (CKA_TRUSTED).
    case keychain
    /// The system bundle, a hashed directory (Debian: /etc/ssl/certs).
    case system(directory: String = "/etc/ssl/certs")
    /// Exactly these certificates.
    case certificates([Certificate])
}

/// SecTrustCreateWithCertificates + SecTrustSetPolicies + SecTrustSetVerifyDate.
public struct TrustRequest: Sendable {
    public var certificate: Certificate
    /// Intermediates the caller has; the keychain's certificates are added to them.
    public var chain: [Certificate]
    public var policy: TrustPolicy
    public var anchors: AnchorChoice
    /// Unix seconds; nil: now.
    public var date: Int64?

    public init(_ certificate: Certificate, chain: [Certificate] = [], policy: TrustPolicy = .basic,
                anchors: AnchorChoice = .keychain, date: Int64? = nil) {
        self.certificate = certificate
        self.chain = chain
        self.policy = policy
        self.anchors = anchors
        self.date = date
    }
}

/// SecPKCS12Import's result: the identity's items and its trust, which is
/// reported, never a reason to refuse the import.
public struct PKCS12ImportResult: Sendable {
    public var label: String
    public var certificate: Certificate
    public var certificateReference: PersistentReference?
    public var privateKeyReference: PersistentReference?
    public var chain: [Certificate]
    /// True when everything was already in the keychain.
    public var duplicate: Bool
    public var trust: TrustEvaluation
}

extension KeychainSession {
    /// Certificates visible to this session; `trusted` narrows to anchors.
    func certificates(trustedOnly: Bool) throws -> [Certificate] {
        var q = Query(itemClass: .certificate, returning: .data)
        q.matchLimit = .all
        q.trustedOnly = trustedOnly
        let items = try findItems(q)
        return items.compactMap { item in
            if trustedOnly && item.attributes.bool(CKA.trusted) != true { return nil }
            return item.attributes[CKA.value].flatMap { try? Certificate(der: $0) }
        }
    }

    /// The keychain's certificates that can sit above `certs` in a chain,
    /// found by walking issuer names through the store's subject index: the
    /// cost follows the chain's depth, not the keychain's size (parsing every
    /// certificate made each `keyshare import` linear, a batch quadratic).
    func keychainIssuers(of certs: [Certificate]) throws -> [Certificate] {
        var found: [Certificate] = []
        var seenSubjects: Set<[UInt8]> = []
        var pending = certs.filter { $0.issuerDER != $0.subjectDER }.map(\.issuerDER)
        while let subject = pending.popLast(), found.count < 64 {
            guard seenSubjects.insert(subject).inserted else { continue }
            var q = Query(itemClass: .certificate, returning: .data)
            q.matchLimit = .all
            q.subjectDER = subject
            for item in try findItems(q) {
                guard let der = item.attributes[CKA.value], let cert = try? Certificate(der: der) else { continue }
                found.append(cert)
                if cert.issuerDER != cert.subjectDER { pending.append(cert.issuerDER) }
            }
        }
        return found
    }

    /// The keychain's anchors (certificates with CKA_TRUSTED set).
    public func trustedAnchors() throws -> [Certificate] { try certificates(trustedOnly: true) }

    /// SecTrustEvaluateWithError: builds a chain from the request's
    /// certificates and the keychain's, up to the chosen anchors, under the
    /// policy and at the date, and answers in the keychain's vocabulary.
    public func evaluateTrust(_ r: TrustRequest) throws -> TrustEvaluation {
        let keychainCerts = try keychainIssuers(of: [r.certificate] + r.chain)
        let anchors: [Certificate]
        var source = TrustAnchorSource.explicit
        switch r.anchors {
        case .keychain: anchors = try trustedAnchors()
        case .system(let dir): anchors = []; source = .system(directory: dir)
        case .certificates(let list): anchors = list
        }
        return TrustEvaluator.evaluate(leaf: r.certificate, intermediates: r.chain + keychainCerts, anchors: anchors,
                                       anchorSource: source, policy: r.policy, at: r.date)
    }

    /// Marks a certificate as a trust anchor, adding it when it is not in the
    /// keychain yet. Idempotent.
    @discardableResult
    public func addAnchor(_ cert: Certificate, token: String? = nil) throws -> PersistentReference {
        if let existing = try? copyFirst(Query(itemClass: .certificate, returning: .persistentReference)
            .matching(cert)).persistentReference {
            // An anchor is a token object, also when it came in as a chain certificate kept apart.
            try mapped {
                try store.update(existing, attributes: [CKA.trusted: AttributeCoding.bool(true),
                                                        CKA.keyshareChainOnly: AttributeCoding.bool(false)], key: nil)
            }
            return existing
        }
        return try add(.certificate(cert, trusted: true), token: token)
    }

    /// Clears CKA_TRUSTED; the certificate stays (identities may need it as
    /// a chain member). `itemNotFound` when it is not an anchor here.
    public func removeAnchor(_ cert: Certificate) throws {
        let items = try findItems(Query(itemClass: .certificate).matching(cert))
            .filter { $0.attributes.bool(CKA.trusted) == true }
        guard !items.isEmpty else { throw KeyShareError.itemNotFound }
        try mapped {
            try store.transaction {
                for i in items { try store.update(i.reference, attributes: [CKA.trusted: AttributeCoding.bool(false)], key: nil) }
            }
        }
    }

    /// SecPKCS12Import: imports the identity (key, certificate, chain) into
    /// the token, then evaluates its trust against the keychain's anchors.
    /// An untrusted chain is reported in `trust`, the import stands.
    public func importPKCS12(_ data: [UInt8], password: String, token: String? = nil,
                             accessGroup: String? = nil, policy: TrustPolicy = .basic) throws -> PKCS12ImportResult {
        let record = try resolve(token)
        let key = try requireKey(record.tokenID)
        let group = try groupForNewItem(accessGroup)
        let contents = try mapped { try PKCS12.parse(data, password: password) }
        let imported = try mapped {
            try store.transaction { () throws -> ImportResult in
                let r = try tokens.importPKCS12(data, password: password, into: record.tokenID, key: key)
                if !r.duplicate {
                    for ref in [r.certificate, r.privateKey, r.publicKey].compactMap({ $0 }) { try assign(ref, to: group) }
                }
                return r
            }
        }
        guard let cert = contents.certificate else { throw KeyShareError.invalidParameter("the PKCS #12 file holds no certificate") }
        let trust = try evaluateTrust(TrustRequest(cert, chain: contents.chain, policy: policy))
        return PKCS12ImportResult(label: imported.label, certificate: cert, certificateReference: imported.certificate,
                                  privateKeyReference: imported.privateKey, chain: contents.chain,
                                  duplicate: imported.duplicate, trust: trust)
    }
}

extension Query {
    /// Narrows a certificate query to one certificate. The store matches
    /// CKA_VALUE exactly through its index, so this is a seek, not a scan.
    func matching(_ cert: Certificate) -> Query {
        var q = self
        q.itemClass = .certificate
        q.label = nil
        q.exactValue = cert.der
        return q
    }
}
