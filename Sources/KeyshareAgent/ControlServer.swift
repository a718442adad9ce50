#if canImport(Glibc)
import Glibc
#endif
import AgentProtocol
import KeyShare
import KeySharing
import Keychain
import KeyshareCrypto
import Tokens

/// The agent's side of the control requests (ControlProtocol.swift): the
/// CLI's unlock/lock, and the CLI's private-key operations, so the CLI
/// process never decrypts a private key (docs/agent.md, "The CLI through the
/// agent"). Every private-key operation takes the user PIN each time (checked
/// and counted by the store); it never rides on `keyshare unlock`, so the CLI
/// is no signing oracle for programs the policy keeps from the token.
struct ControlServer {
    let agent: Agent
    let fd: Int32
    let pid: pid_t

    func serve(_ buf: inout ksa_buf) {
        guard let (head, request) = ControlProtocol.decode(buf), let op = ControlProtocol.Op(rawValue: head) else {
            AgentLog.line("pid \(pid): malformed control request refused")
            reply(status: 1, ["error": Array("malformed request to the keyshare agent".utf8)])
            return
        }
        ksa_buf_reset(&buf)  // the request may hold a PIN
        var pin = request["pin"] ?? []
        defer { pin.withUnsafeMutableBytes { if let b = $0.baseAddress { explicit_bzero(b, $0.count) } } }
        do {
            let out = try handle(op, request, pin: pin)
            // Any control request may change what a C_VerifyInit finds (unlock, lock, generate...):
            // the clients' cached answers end before the CLI hears back (Sources/AgentProtocol/epoch.c).
            ksa_epoch_bump()
            reply(status: 0, out.fields)
        } catch {
            ksa_epoch_bump()
            let text = Self.describe(error)
            AgentLog.line("pid \(pid): control \(op) refused: \(text)")
            reply(status: 1, ["error": Array(text.utf8)])
        }
    }

    private func reply(status: UInt16, _ fields: [String: [UInt8]]) {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }  // zeroes: a decrypted plaintext or a PKCS #12 passes through
        ControlProtocol.encode(status, ControlProtocol.Message(fields), into: &b)
        _ = ksa_write_frame(fd, b.data, b.len)
    }

    /// Every operation works on the agent's own store (docs/agent.md, "Which
    /// store"); a request names none. A store opened here must be the file
    /// the agent serves (Agent.verify).
    private func handle(_ op: ControlProtocol.Op, _ r: ControlProtocol.Message, pin: [UInt8]) throws -> ControlProtocol.Message {
        let home = agent.storeHome
        func store() throws -> KeychainStore {
            guard let s = try agent.openStore() else {
                throw ControlProtocol.Failure("there is no store at \(home) yet (keyshare token create makes one)")
            }
            return s
        }
        func session(_ groups: [String]?) throws -> KeychainSession {
            _ = try store()
            let s = try KeychainSession(home: home, accessGroups: groups)
            try agent.verify(s.store)
            return s
        }
        switch op {
        case .agentStatus:
            var m = ControlProtocol.Message()
            for (k, v) in agent.status() { m.set(k, v) }
            return m
        case .agentStop:
            AgentLog.line("pid \(pid): keyshare agent stop")
            agent.requestStop()
            return ControlProtocol.Message()
        case .unlock:
            guard let seconds = r.string("seconds").flatMap(Double.init), seconds > 0, seconds <= 7 * 86400 else {
                throw ControlProtocol.Failure("the unlock duration must be between 1 second and 7 days")
            }
            let store = try store()
            let token = try TokenManager(store: store).resolveToken(r.string("token"))
            guard token.hasPINs else { throw ControlProtocol.Failure("token \(token.label) is a card: its PIN is the card's, it cannot be unlocked here") }
            // The programs it reaches (UnlockScope: named by --program, else by the
            // policy's unlock rules; never every program, never an authenticator).
            let paths = r.string("programs").map { $0.split(separator: "\n").map(String.init) }
            let policy: AgentPolicy
            do { policy = try AgentPolicy.load(from: store) } catch { throw ControlProtocol.Failure("the agent policy cannot be read: \(error)") }
            let scope = try UnlockScope.make(paths: paths, policy: policy, token: token.tokenID)
            let key = try Self.naming(token) { try store.unlockUser(token.tokenID, pin: pin) }
            agent.unlock(token: token.tokenID, key: key, seconds: seconds, scope: scope)
            for (path, why) in scope.leftOut { AgentLog.line("pid \(pid): unlock of token \(token.label): not for \(path): \(why)") }
            let names = scope.programs.map(\.path)
            AgentLog.line("pid \(pid): token \(token.label) (\(token.tokenID)) of \(home) " + (names.isEmpty
                ? "not unlocked: no program named (\(scope.source))"
                : "unlocked for \(Int(seconds))s for \(names.joined(separator: ", ")) (\(scope.source))"))
            var m = ControlProtocol.Message()
            m.set("label", token.label)
            m.set("token", token.tokenID.description)
            m.set("programs", names.joined(separator: "\n"))
            m.set("leftOut", scope.leftOut.map { "\($0.path)\t\($0.why)" }.joined(separator: "\n"))
            m.set("source", scope.source)
            return m
        case .lock:
            var only: TokenID?
            if let name = r.string("token") {
                let store = try store()
                only = try TokenManager(store: store).resolveToken(name, includeAbsent: true).tokenID
            }
            let n = agent.endUnlock(token: only, why: "locked by pid \(pid)")
            var m = ControlProtocol.Message()
            m.set("count", String(n))
            return m
        case .status:
            var m = ControlProtocol.Message()
            m.set("unlocked", agent.unlockedSummary())
            return m
        case .resolveToken:
            let store = try store()
            let token = try TokenManager(store: store).resolveToken(r.string("token"))
            var m = ControlProtocol.Message()
            m.set("label", token.label)
            m.set("token", token.tokenID.description)
            return m
        case .sign, .decrypt, .decapsulate:
            let groups = r.string("groups").map { $0.split(separator: ",").map(String.init) }
            let session = try session(groups)
            guard let id = TokenID(r.string("token") ?? ""), let token = try session.store.token(id) else { throw KeychainError.tokenNotFound }
            _ = try Self.naming(token) { try session.unlock(token: token.tokenID.description, pin: pin) }
            let tag = r.string("tag") ?? ""
            let input = r["data"] ?? []
            var m = ControlProtocol.Message()
            if op == .sign, case let k = try Self.key(session, tag: tag, .privateKey), k.keyType.isPostQuantum {
                m["result"] = try Self.signPostQuantum(k, input, algorithm: r.string("algorithm") ?? "", context: r["context"])
                AgentLog.line("pid \(pid): signed (\(k.keyType)) with tag \(tag) of token \(token.label) for the CLI")
            } else if op == .decapsulate {
                let k = try Self.key(session, tag: tag, .privateKey)
                m["result"] = try k.decapsulate(input)
                AgentLog.line("pid \(pid): decapsulated (\(k.keyType)) with tag \(tag) of token \(token.label) for the CLI")
            } else if op == .sign {
                let k = try Self.key(session, tag: tag, .privateKey)
                let name = r.string("algorithm") ?? ""
                if r["context"] != nil {
                    throw ControlProtocol.Failure("--context is for ML-DSA and SLH-DSA keys; tag \(tag) is an \(k.keyType) key")
                }
                guard let alg = name.isEmpty ? Self.defaultSignature(for: k.keyType) : Self.signature(named: name) else {
                    throw ControlProtocol.Failure("unknown signature algorithm \(name)")
                }
                var sig = try k.createSignature(input, algorithm: alg)
                if k.keyType == .ec { sig = try ECDSASignatureEncoding.der(fromRaw: sig) }
                m["result"] = sig
                AgentLog.line("pid \(pid): signed with tag \(tag) of token \(token.label) for the CLI")
            } else {
                let k = try Self.key(session, tag: tag, .privateKey)
                guard let padding = Self.padding(named: r.string("padding") ?? "") else {
                    throw ControlProtocol.Failure("unknown padding \(r.string("padding") ?? "")")
                }
                m["result"] = try k.decrypt(input, padding: padding)
                AgentLog.line("pid \(pid): decrypted with tag \(tag) of token \(token.label) for the CLI")
            }
            return m
        case .share:
            return try share(r, store: try store(), pin: pin)
        case .servePassword:
            let client = ksa_recv_fd(fd)
            guard client >= 0 else { throw ControlProtocol.Failure("the password service's request came without its client's connection") }
            defer { close(client) }
            return try servePassword(r, store: try store(), client: client)
        case .csr:
            return try csr(r, session: try session(r.string("groups").map { $0.split(separator: ",").map(String.init) }), pin: pin)
        case .generate:
            return try generate(r, session: try session(r.string("groups").map { $0.split(separator: ",").map(String.init) }), pin: pin)
        case .export:
            let store = try store()
            let tokens = TokenManager(store: store)
            guard let id = TokenID(r.string("token") ?? ""), let token = try store.token(id) else { throw KeychainError.tokenNotFound }
            let key = try Self.naming(token) { try store.unlockUser(token.tokenID, pin: pin) }
            let item = r.string("item") ?? ""
            let identities = try tokens.identities(in: token.tokenID, key: key)
            let identity: Identity
            if let ref = PersistentReference(base64url: item),
               let found = identities.first(where: { $0.certificateReference == ref || $0.privateKeyReference == ref }) {
                identity = found
            } else if let found = identities.first(where: { $0.label == item }) {
                identity = found
            } else if let found = identities.first(where: { $0.certificate.sha256Hex == item }) {
                // The key-sharing label (the SHA-256 of the certificate), as share identifiers
                // and the labels of earlier releases name an identity.
                identity = found
            } else {
                throw ControlProtocol.Failure("no identity (certificate with its private key) named \(item) in token \(token.label)")
            }
            guard let profile = PKCS12.Profile(rawValue: r.string("profile") ?? "modern") else {
                throw ControlProtocol.Failure("unknown PKCS #12 profile")
            }
            // One transaction: a failed build leaves no shared password behind.
            let bytes = try store.transaction { () throws -> [UInt8] in
                let password = try SharedPassword.obtain(store: store, token: token.tokenID, key: key)
                return try IdentityExport.pkcs12(of: identity, store: store, key: key, password: password, profile: profile)
            }
            AgentLog.line("pid \(pid): exported identity \(identity.label) of token \(token.label) as PKCS #12 (\(profile.rawValue)) for the CLI")
            var m = ControlProtocol.Message()
            m["result"] = bytes
            m.set("label", identity.label)
            m.set("certificate", identity.certificateReference.base64url)
            m["id"] = identity.id
            return m
        }
    }

    /// `keyshare share list/get/export-tree`: every shareable identity's
    /// PKCS #12 (under the shared password, made on first use in the same
    /// transaction) is built here; the reply holds the identities' labels,
    /// certificates and files as three lists ("labels", "certificates",
    /// "pkcs12", packed by ShareWire: a message holds at most 64 fields; "count"),
    /// from which the CLI lays out the tree and the zips; "leftOut" names the
    /// identities left out (TPM or non-exportable keys) for the CLI's notes.
    /// The private keys and the password stay in the agent.
    private func share(_ r: ControlProtocol.Message, store: KeychainStore, pin: [UInt8]) throws -> ControlProtocol.Message {
        let tokens = TokenManager(store: store)
        guard let id = TokenID(r.string("token") ?? ""), let token = try store.token(id) else { throw KeychainError.tokenNotFound }
        let key = try Self.naming(token) { try store.unlockUser(token.tokenID, pin: pin) }
        guard let profile = PKCS12.Profile(rawValue: r.string("profile") ?? "modern") else {
            throw ControlProtocol.Failure("unknown PKCS #12 profile")
        }
        let (identities, leftOut) = try ShareFiles.partition(tokens: tokens, token: token.tokenID, key: key)
        var m = ControlProtocol.Message()
        if !leftOut.isEmpty { m["leftOut"] = ShareTree.LeftOut.encode(leftOut) }
        try store.transaction {
            let password = try SharedPassword.obtain(store: store, token: token.tokenID, key: key)
            let files = ShareFiles(identities: identities, store: store, key: key, password: password, profile: profile)
            m["labels"] = ShareWire.pack(identities.map { Array($0.label.utf8) })
            m["certificates"] = ShareWire.pack(identities.map(\.certificate.der))
            m["pkcs12"] = ShareWire.pack(try identities.map { try files.pkcs12(label: $0.label) })
        }
        m.set("count", String(identities.count))
        AgentLog.line("pid \(pid): built the share tree's \(identities.count) PKCS #12 files (\(profile.rawValue)) of token \(token.label) for the CLI, \(leftOut.count) identities left out")
        return m
    }

    /// `keyshare serve` without a PIN source (issue 28 item 4): the client's
    /// connection came with the request; the caller is judged here against the
    /// share policy of this agent's store (not one the service names), and the
    /// shared password is answered only while `keyshare unlock` has the token
    /// unlocked for the calling program. The reply goes to the client
    /// directly; the service gets the state for its log.
    private func servePassword(_ r: ControlProtocol.Message, store: KeychainStore, client: Int32) throws -> ControlProtocol.Message {
        let token = try TokenManager(store: store).resolveToken(r.string("token"))
        let home = agent.storeHome
        let outcome = AgentAnswer.answer(client: client, policy: { try AccessPolicyFile.load(home: home) }) { program in
            guard let key = agent.unlockedKey(token: token.tokenID, for: program) else {
                let why = agent.isUnlocked(token: token.tokenID) ? "is not unlocked for \(program.path)" : "is locked"
                return .failure(AgentAnswer.Refused(.notEnabled,
                    "token \(token.label) \(why): the password service answers while the token is unlocked for the program that asks "
                    + "(keyshare unlock --for 8h --program \(program.path))"))
            }
            do {
                return .success(try store.transaction { try SharedPassword.obtain(store: store, token: token.tokenID, key: key) })
            } catch {
                return .failure(AgentAnswer.Refused(.notEnabled, "the shared password cannot be read: \(error)"))
            }
        }
        AgentLog.line("pid \(pid): password service: \(outcome.exe ?? "a client"): \(outcome.state.rawValue) for token \(token.label)"
            + (outcome.reason.map { " (\($0))" } ?? ""))
        var m = ControlProtocol.Message()
        m.set("state", outcome.state.rawValue)
        m.set("reason", outcome.reason)
        m.set("exe", outcome.exe)
        return m
    }

    /// `keyshare csr`: the PKCS #10 request is signed here; the reply carries
    /// the request (DER) and the signing key's public attributes for the CLI's report.
    private func csr(_ r: ControlProtocol.Message, session: KeychainSession, pin: [UInt8]) throws -> ControlProtocol.Message {
        guard let id = TokenID(r.string("token") ?? ""), let token = try session.store.token(id) else { throw KeychainError.tokenNotFound }
        _ = try Self.naming(token) { try session.unlock(token: token.tokenID.description, pin: pin) }
        let signer = try Self.csrKey(session, token: token, tag: r.string("tag"), key: r.string("key"), id: r["id"],
                                     idText: r.string("idText"))
        let a = signer.attributes
        if case .mlKEM = signer.keyType {
            throw ControlProtocol.Failure("an \(signer.keyType) key cannot sign a certificate request (it is a KEM key)")
        }
        guard a.usage.contains(.sign) else {
            throw ControlProtocol.Failure("the key \(a.label ?? "") may not sign (CKA_SIGN is false)")
        }
        let names = try CertificateRequest.parseSubject(r.string("subject") ?? "")
        let sans = try (r.string("sans") ?? "").split(separator: "\n").map { try CertificateRequest.AltName(argument: String($0)) }
        // KeyRef signs in the PKCS #11 form (ECDSA as r||s), which CertificateRequest converts.
        let request = try CertificateRequest.build(subject: names, altNames: sans, publicKey: signer.publicKey) { tbs, algorithm in
            try signer.createSignature(tbs, algorithm: algorithm)
        }
        AgentLog.line("pid \(pid): signed a certificate request with key \(a.persistentReference.base64url) of token \(token.label) for the CLI")
        var m = ControlProtocol.Message()
        m["result"] = request
        Self.describe(a, into: &m)
        return m
    }

    /// `keyshare key generate`: the pair is generated here, so the private key
    /// never exists in the CLI; the reply describes both keys (public attributes).
    private func generate(_ r: ControlProtocol.Message, session: KeychainSession, pin: [UInt8]) throws -> ControlProtocol.Message {
        guard let id = TokenID(r.string("token") ?? ""), let token = try session.store.token(id) else { throw KeychainError.tokenNotFound }
        let words = (r.string("spec") ?? "").split(separator: ":").map(String.init)
        let spec: KeySpec
        if words.count == 2, words[0] == "rsa", let bits = Int(words[1]), [2048, 3072, 4096].contains(bits) {
            spec = .rsa(bits: bits)
        } else if words.count == 2, words[0] == "ec", let c = ECCurve(rawValue: words[1]), [.p256, .p384, .p521].contains(c) {
            spec = .ec(c)
        } else if words == ["ed25519"] {
            spec = .ed25519
        } else if words.count == 2, words[0] == "pq", let t = KeyType(postQuantumName: words[1]) {
            spec = .postQuantum(t)
        } else {
            throw ControlProtocol.Failure("unknown key type \(r.string("spec") ?? "")")
        }
        _ = try Self.naming(token) { try session.unlock(token: token.tokenID.description, pin: pin) }
        let tag = r.string("tag") ?? ""
        let pair: (privateKey: KeyRef, publicKey: KeyRef)
        do {
            pair = try session.generateKeyPair(KeyPairParameters(
                spec, label: r.string("label") ?? "", applicationTag: Array(tag.utf8), token: token.tokenID.description,
                usage: r.string("usage").flatMap(UInt8.init).map(UsageFlags.init(rawValue:)),
                extractable: r.string("extractable") == "1"))
        } catch KeyShareError.duplicateItem {
            throw ControlProtocol.Failure("a key with tag \(tag) already exists (duplicate item)")
        }
        AgentLog.line("pid \(pid): generated a key pair with tag \(tag) in token \(token.label) for the CLI")
        var priv = ControlProtocol.Message(), pub = ControlProtocol.Message()
        Self.describe(pair.privateKey.attributes, into: &priv)
        Self.describe(pair.publicKey.attributes, into: &pub)
        var m = ControlProtocol.Message()
        for (k, v) in priv.fields { m["private." + k] = v }
        for (k, v) in pub.fields { m["public." + k] = v }
        return m
    }

    /// A key's public attributes, as the CLI reports them (its KeyRow).
    static func describe(_ a: ItemAttributes, into m: inout ControlProtocol.Message) {
        m.set("class", a.itemClass == .privateKey ? "private-key" : "public-key")
        m.set("label", a.label)
        m["tag"] = a.applicationTag
        m.set("keyType", a.keyType.map { "\($0)" } ?? "")
        m.set("bits", String(a.keySizeInBits ?? 0))
        m.set("accessGroup", a.accessGroup)
        m.set("reference", a.persistentReference.base64url)
        m["id"] = a.pkcs11[CKA.id]
        let names: [(UsageFlags, String)] = [(.sign, "sign"), (.verify, "verify"), (.encrypt, "encrypt"), (.decrypt, "decrypt"),
                                              (.derive, "derive"), (.wrap, "wrap"), (.unwrap, "unwrap")]
        // ML-KEM's usage is PKCS #11 3.2's CKA_ENCAPSULATE / CKA_DECAPSULATE.
        let kem = [(CKA.encapsulate, "encapsulate"), (CKA.decapsulate, "decapsulate")].filter { a.pkcs11[$0.0] == [1] }.map(\.1)
        m.set("usage", (names.filter { a.usage.contains($0.0) }.map(\.1) + kem).joined(separator: ","))
    }

    /// The CSR's key: by tag, by persistent reference or label, or by CKA_ID (as the CLI named it).
    static func csrKey(_ session: KeychainSession, token: TokenRecord, tag: String?, key: String?, id: [UInt8]?,
                       idText: String?) throws -> KeyRef {
        let t = token.tokenID
        do {
            if let tag {
                return try session.key(tag: Array(tag.utf8), itemClass: .privateKey, token: t)
            }
            if let key, let ref = PersistentReference(base64url: key), let k = try? session.keyRef(ref), k.isPrivate {
                return k
            }
            let all = try session.copyMatching(Query(itemClass: .privateKey, tokenID: t, returning: [.reference, .attributes]))
            let hit = all.first { r in
                guard let a = r.attributes else { return false }
                if let id { return a.pkcs11[CKA.id] == id }
                return a.label == key
            }
            guard case .key(let k)? = hit?.reference else { throw KeyShareError.itemNotFound }
            return k
        } catch KeyShareError.itemNotFound {
            let name = tag.map { "tag \($0)" } ?? key.map { "reference or label \($0)" } ?? "CKA_ID \(idText ?? "")"
            throw ControlProtocol.Failure("no private key with \(name) in token \(token.label)")
        }
    }

    static func key(_ session: KeychainSession, tag: String, _ cls: ItemClass) throws -> KeyRef {
        do {
            return try session.key(tag: Array(tag.utf8), itemClass: cls)
        } catch KeyShareError.itemNotFound {
            throw ControlProtocol.Failure("no private key with tag \(tag) (or the token is locked: give --pin-source)")
        }
    }

    /// The CLI's algorithm names (keyshare key sign --algorithm).
    static func signature(named name: String) -> SignatureAlgorithm? {
        switch name {
        case "pkcs1-sha256": .rsaPKCS1(.sha256)
        case "pss-sha256": .rsaPSS(.sha256, mgf1: .sha256, saltLength: 32)
        case "ecdsa-sha256": .ecdsa(.sha256)
        case "ecdsa-sha384": .ecdsa(.sha384)
        case "ed25519": .ed25519
        default: nil
        }
    }

    /// ML-DSA / SLH-DSA (pure, with the FIPS 204/205 context when the CLI gave one); an ML-KEM
    /// key is refused in one line (it encapsulates, it does not sign).
    static func signPostQuantum(_ k: KeyRef, _ input: [UInt8], algorithm: String, context: [UInt8]?) throws -> [UInt8] {
        let family: String
        switch k.keyType {
        case .mlDSA: family = "ml-dsa"
        case .slhDSA: family = "slh-dsa"
        default:
            throw ControlProtocol.Failure("an \(k.keyType) key cannot sign (it is a KEM key: use keyshare key encapsulate/decapsulate)")
        }
        guard algorithm.isEmpty || algorithm == family else {
            throw ControlProtocol.Failure("algorithm \(algorithm) does not fit an \(k.keyType) key (use \(family))")
        }
        return try k.createSignature(input, context: context ?? [])
    }

    static func defaultSignature(for type: KeyType) -> SignatureAlgorithm {
        switch type {
        case .rsa: .rsaPKCS1(.sha256)
        case .ec: .ecdsa(.sha256)
        case .ed25519, .ed448, .x25519, .x448: .ed25519
        // ML-KEM does not sign: the pure ML-DSA default then fails the key's fit check with a clear error.
        case .mlDSA, .mlKEM: .mlDSA
        case .slhDSA: .slhDSA
        }
    }

    static func padding(named name: String) -> RSAPadding? {
        switch name {
        case "pkcs1": .pkcs1
        case "oaep-sha256": .oaep(.sha256, mgf1: .sha256, label: [])
        default: nil
        }
    }

    /// The CLI's wording of PIN failures (PINErrors in the CLI).
    static func naming<T>(_ token: TokenRecord, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch KeychainError.pinIncorrect(let remaining) {
            throw ControlProtocol.Failure("incorrect user PIN for token \(token.label) (\(remaining) attempt\(remaining == 1 ? "" : "s") left before it locks)")
        } catch KeychainError.pinLocked {
            throw ControlProtocol.Failure("the user PIN of token \(token.label) is locked after too many failed attempts; the security officer must set a new one (keyshare token init-pin)")
        }
    }

    static func describe(_ error: Error) -> String {
        if let e = error as? ControlProtocol.Failure { return e.description }
        return String(describing: error)
    }
}
