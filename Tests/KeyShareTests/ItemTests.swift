import Testing
@testable import KeyShare

/// A throwaway keychain with one unlocked soft token; low scrypt cost.
struct Fixture {
    let home: String
    let keychain: KeychainSession
    let token: TokenID

    init(groups: [String]? = nil) throws {
        home = TestData.scratch("home")
        keychain = try KeychainSession(home: home, kdfLog2N: 10, accessGroups: groups)
        token = try keychain.createSoftToken(label: "lib", soPIN: Array("so".utf8), userPIN: Array("1234".utf8))
        try keychain.unlock(pin: Array("1234".utf8))
    }

    /// Another session on the same store, bound to other groups.
    func session(groups: [String]?) throws -> KeychainSession {
        let s = try KeychainSession(home: home, kdfLog2N: 10, accessGroups: groups)
        try s.unlock(pin: Array("1234".utf8))
        return s
    }
}

@Suite("SecItem counterparts")
struct ItemTests {
    @Test func queryByEveryAttribute() throws {
        let f = try Fixture()
        let k = f.keychain
        let rsa = try k.generateKeyPair(KeyPairParameters(.rsa(bits: 2048), label: "rsa", applicationTag: Array("t.rsa".utf8)))
        _ = try k.generateKeyPair(KeyPairParameters(.ec(.p384), label: "ec", applicationTag: Array("t.ec".utf8), usage: [.sign]))
        _ = try k.generateKeyPair(KeyPairParameters(.ed25519, label: "ed", applicationTag: Array("t.ed".utf8)))

        #expect(try k.copyMatching(Query(itemClass: .privateKey)).count == 3)
        #expect(try k.copyMatching(Query(itemClass: .publicKey)).count == 3)
        #expect(try k.copyMatching(Query(label: "ec")).count == 2)
        #expect(try k.copyFirst(Query(itemClass: .publicKey, applicationTag: Array("t.ed".utf8))).attributes?.keyType == .ed25519)
        #expect(try k.copyMatching(Query(keyType: .rsa)).count == 2)
        #expect(try k.copyMatching(Query(keySizeInBits: 384)).count == 2)
        #expect(try k.copyMatching(Query(keySizeInBits: 2048)).allSatisfy { $0.attributes?.label == "rsa" })
        #expect(try k.copyMatching(Query(tokenID: f.token)).count == 6)
        #expect(try k.copyMatching(Query(accessGroup: "default")).count == 6)
        #expect(throws: KeyShareError.itemNotFound) { try k.copyMatching(Query(accessGroup: "other")) }
        // usage: the sign-only EC pair does not decrypt; RSA private keys do.
        let decrypters = try k.copyMatching(Query(itemClass: .privateKey, usage: [.decrypt]))
        #expect(decrypters.map { $0.attributes?.label } == ["rsa"])
        #expect(try k.copyMatching(Query(itemClass: .privateKey, usage: [.sign])).count == 3)
        let ref = rsa.privateKey.persistentReference
        #expect(try k.copyMatching(Query(persistentReference: ref)).first?.attributes?.label == "rsa")
    }

    @Test func matchLimitOneAndAll() throws {
        let f = try Fixture()
        for i in 0..<3 {
            try f.keychain.add(.genericPassword(service: "svc", account: "a\(i)", value: Array("v\(i)".utf8)))
        }
        #expect(try f.keychain.copyMatching(Query(label: "svc", matchLimit: .all)).count == 3)
        #expect(try f.keychain.copyMatching(Query(label: "svc", matchLimit: .one)).count == 1)
    }

    @Test func everyReturnType() throws {
        let f = try Fixture()
        let k = f.keychain
        let pair = try k.generateKeyPair(KeyPairParameters(.ec(.p256), label: "k", applicationTag: Array("tag".utf8)))
        let all: ReturnOptions = [.reference, .attributes, .data, .persistentReference]
        let pub = try k.copyFirst(Query(itemClass: .publicKey, applicationTag: Array("tag".utf8), returning: all))
        #expect(pub.persistentReference == pair.publicKey.persistentReference)
        #expect(pub.attributes?.applicationTag == Array("tag".utf8))
        #expect(pub.attributes?.accessGroup == "default")
        #expect(try pub.data == pair.publicKey.publicKey.spkiDER())
        guard case .key(let ref)? = pub.reference else { Issue.record("no key reference"); return }
        #expect(!ref.isPrivate)
        // Only what was asked for is set.
        let onlyRef = try k.copyFirst(Query(itemClass: .publicKey, returning: .persistentReference))
        #expect(onlyRef.attributes == nil && onlyRef.data == nil && onlyRef.reference == nil && onlyRef.persistentReference != nil)
        // A generated private key is sensitive: its data never leaves.
        #expect(throws: KeyShareError.self) {
            try k.copyFirst(Query(itemClass: .privateKey, returning: .data))
        }
        // Certificates: data is the DER, the reference a Certificate.
        let cert = try Certificate(der: TestData.certificateDER())
        try k.add(.certificate(cert))
        let c = try k.copyFirst(Query(itemClass: .certificate, returning: [.data, .reference]))
        #expect(c.data == cert.der)
        if case .certificate(let back)? = c.reference { #expect(back == cert) } else { Issue.record("no certificate reference") }
        // Passwords: data is the value.
        try k.add(.genericPassword(service: "imap", account: "alice", value: Array("pw".utf8)))
        #expect(try k.copyFirst(Query(itemClass: .genericPassword, label: "imap", returning: .data)).data == Array("pw".utf8))
    }

    @Test func itemNotFoundAndDuplicateItem() throws {
        let f = try Fixture()
        let k = f.keychain
        #expect(throws: KeyShareError.itemNotFound) { try k.copyMatching(Query(label: "nothing")) }
        #expect(throws: KeyShareError.itemNotFound) { try k.delete(Query(label: "nothing")) }
        #expect(throws: KeyShareError.itemNotFound) { try k.update(Query(label: "nothing"), ItemChanges(label: "x")) }
        try k.add(.genericPassword(service: "s", account: "a", value: [1]))
        #expect(throws: KeyShareError.duplicateItem) { try k.add(.genericPassword(service: "s", account: "a", value: [2])) }
        _ = try k.generateKeyPair(KeyPairParameters(.ed25519, label: "e", applicationTag: Array("dup".utf8)))
        #expect(throws: KeyShareError.duplicateItem) {
            try k.generateKeyPair(KeyPairParameters(.ed25519, label: "e2", applicationTag: Array("dup".utf8)))
        }
        let cert = try Certificate(der: TestData.certificateDER())
        try k.add(.certificate(cert))
        #expect(throws: KeyShareError.duplicateItem) { try k.add(.certificate(cert)) }
    }

    @Test func persistentReferenceRoundTrip() throws {
        let f = try Fixture()
        let ref = try f.keychain.add(.genericPassword(service: "svc", account: "acct", value: Array("secret".utf8)))
        // Through its text form, as it would be stored on disk, and in a new session.
        let text = ref.base64url
        let again = try #require(PersistentReference(base64url: text))
        let other = try f.session(groups: nil)
        let item = try other.copyFirst(Query(persistentReference: again, returning: [.attributes, .data, .persistentReference]))
        #expect(item.persistentReference == ref)
        #expect(item.attributes?.label == "svc")
        #expect(item.data == Array("secret".utf8))
        try other.delete(Query(persistentReference: again))
        #expect(throws: KeyShareError.itemNotFound) { try f.keychain.copyMatching(Query(persistentReference: ref)) }
    }

    @Test func updateAndDelete() throws {
        let f = try Fixture()
        let k = f.keychain
        try k.add(.genericPassword(service: "svc", account: "a", value: Array("old".utf8)))
        try k.update(Query(itemClass: .genericPassword, label: "svc"), ItemChanges(value: Array("new".utf8)))
        #expect(try k.copyFirst(Query(label: "svc", returning: .data)).data == Array("new".utf8))
        try k.update(Query(label: "svc"), ItemChanges(label: "renamed"))
        #expect(try k.copyMatching(Query(label: "renamed")).count == 1)
        #expect(try k.delete(Query(label: "renamed")) == 1)
    }

    @Test func accessGroupsHideOtherGroups() throws {
        let f = try Fixture()
        let a = try f.session(groups: ["group.a"]), b = try f.session(groups: ["group.b"])
        try a.add(.genericPassword(service: "only-a", account: "x", value: [1]))
        try b.add(.genericPassword(service: "only-b", account: "x", value: [2]))
        #expect(try a.copyMatching(Query(itemClass: .genericPassword)).map { $0.attributes?.label } == ["only-a"])
        #expect(try b.copyMatching(Query(itemClass: .genericPassword)).map { $0.attributes?.label } == ["only-b"])
        #expect(throws: KeyShareError.itemNotFound) { try a.copyMatching(Query(label: "only-b")) }
        #expect(throws: KeyShareError.itemNotFound) { try a.delete(Query(label: "only-b")) }
        // A persistent reference of another group's item resolves to nothing, too.
        let bRef = try #require(try b.copyFirst(Query(label: "only-b", returning: .persistentReference)).persistentReference)
        #expect(throws: KeyShareError.itemNotFound) { try a.copyMatching(Query(persistentReference: bRef)) }
        #expect(throws: KeyShareError.notInAccessGroup("group.b")) { try a.add(.genericPassword(service: "s", account: "y", value: [3]), accessGroup: "group.b") }
        // The owner (unbound) sees both, each with its group.
        let groups = try f.keychain.copyMatching(Query(itemClass: .genericPassword)).compactMap { $0.attributes?.accessGroup }
        #expect(Set(groups) == ["group.a", "group.b"])
    }
}

/// A certificate added after its key joins that key's pair, whatever CKA_ID
/// the key was given (pkcs11-tool --keypairgen --id 01, another tool's
/// import): consumers (NSS, OpenVPN, libp11) pair key and certificate by
/// CKA_ID, so a certificate under the key-identifier ID would be an orphan.
@Suite("Certificate joins its key pair")
struct CertificatePairingTests {
    @Test func certificateTakesTheExistingPairsID() throws {
        let f = try Fixture()
        let k = f.keychain
        let key = try PrivateKey(pem: String(decoding: try TestData.bytes("identities/device-ds-ke.key.pem"), as: UTF8.self))
        try k.add(.privateKey(key, label: "enrolled", applicationTag: Array("enrol".utf8)))
        // Re-key the pair's CKA_ID as another tool would have chosen it.
        let chosenID: [UInt8] = [0x01]
        for item in try k.copyMatching(Query(applicationTag: Array("enrol".utf8), returning: .persistentReference)) {
            try k.store.update(try #require(item.persistentReference), attributes: [CKA.id: chosenID], key: k.key(for: f.token))
        }
        let cert = try Certificate(der: TestData.certificateDER())
        let ref = try k.add(.certificate(cert))
        let stored = try k.store.item(ref, key: nil)
        #expect(stored.attributes[CKA.id] == chosenID, "the certificate must take the pair's CKA_ID")
        #expect(stored.attributes[CKA.label] == Array("enrolled".utf8), "and, given no label, the pair's label")
    }

    @Test func certificateWithoutKeyKeepsKeyIdentifier() throws {
        let f = try Fixture()
        let cert = try Certificate(der: TestData.certificateDER())
        let ref = try f.keychain.add(.certificate(cert))
        #expect(try f.keychain.store.item(ref, key: nil).attributes[CKA.id] == (try cert.publicKey.keyIdentifier()))
    }
}
