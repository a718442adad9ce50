import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto
@testable import Tokens

/// Issue 27 §4: names people read. An identity's default label is the
/// PKCS #12 friendlyName, else the subject's commonName, else its email,
/// else the SHA-256; unique in its token. The chain imported with an
/// identity is kept out of the token's objects unless asked for.
@Suite struct IdentityLabelTests {
    func bundle(_ id: String) throws -> (PrivateKey, Certificate) {
        (try PrivateKey(pem: try Fixture.text("identities/\(id).key.pem")),
         try Certificate(der: try Fixture.bytes("identities/\(id).cert.der")))
    }

    @Test func theFriendlyNameIsTheLabel() throws {
        let env = try Env()
        let modern = try env.manager.importPKCS12(try Fixture.bytes("identities/device-ds-ke.modern.p12"),
                                                  password: Fixture.password, into: env.token.tokenID, key: env.key)
        #expect(modern.label == "Test Device 1234567890 (device 048F)")
        // A shared legacy file's friendlyName is the key-sharing label: the certificate's SHA-256.
        let legacy = try env.manager.importPKCS12(try Fixture.bytes("identities/signature-ds-email.legacy.p12"),
                                                  password: Fixture.password, into: env.token.tokenID, key: env.key)
        let cert = try Certificate(der: try Fixture.bytes("identities/signature-ds-email.cert.der"))
        #expect(legacy.label == cert.sha256Hex)
        let labels = try env.store.find(ItemQuery(tokenID: env.token.tokenID), key: env.key).compactMap { $0.attributes.string(CKA.label) }
        #expect(labels.filter { $0 == modern.label }.count == 3)  // certificate, private and public key
    }

    @Test func theCommonNameMadeUniqueInTheToken() throws {
        let env = try Env()
        var labels: [String] = []
        for id in ["device-ds-ke", "device-ds-only", "device-old-ec"] {  // three certificates of CN=Test Device 1234567890
            let (k, c) = try bundle(id)
            labels += try env.manager.importBundle(privateKeys: [k], certificates: [c], into: env.token.tokenID, key: env.key).map(\.label)
        }
        #expect(labels == ["Test Device 1234567890", "Test Device 1234567890 (2)", "Test Device 1234567890 (3)"])
        // Importing one again finds it under its own label; an explicit --label is taken as given.
        let (k, c) = try bundle("device-ds-only")
        #expect(try env.manager.importBundle(privateKeys: [k], certificates: [c], into: env.token.tokenID, key: env.key)
            .map(\.label) == ["Test Device 1234567890 (2)"])
        // Another token has its own names.
        let other = try env.manager.createSoftToken(label: "Other", soPIN: soPIN, userPIN: userPIN)
        let otherKey = try env.store.unlockUser(other.tokenID, pin: userPIN)
        #expect(try env.manager.importBundle(privateKeys: [k], certificates: [c], into: other.tokenID, key: otherKey)
            .map(\.label) == ["Test Device 1234567890"])
        // A lone end-entity certificate gets the readable name too; its key, imported later, joins it.
        let (k2, c2) = try bundle("signature-ds-nr")
        let lone = try env.manager.importCertificate(c2, into: env.token.tokenID, key: env.key)
        #expect(lone.label == "Test User 1234567890")
        #expect(try env.manager.importPrivateKey(k2, label: nil, into: env.token.tokenID, key: env.key).label == lone.label)
    }

    @Test func readableFallbacks() throws {
        let c = try Certificate(der: try Fixture.bytes("identities/signature-ds-email.cert.der"))
        #expect(c.commonName == "Test User 1234567890")
        #expect(c.email == "test.user.1234567890@mail.example")  // from the SAN's rfc822Name
        #expect(IdentityLabel.readable(friendlyName: " \u{7}carol\n ", certificate: c) == "carol")
        #expect(IdentityLabel.readable(friendlyName: " ", certificate: c) == "Test User 1234567890")
        #expect(IdentityLabel.readable(friendlyName: nil, certificate: c) == "Test User 1234567890")
        #expect(IdentityLabel.readable(friendlyName: String(repeating: "x", count: 300), certificate: c).count == IdentityLabel.maxLength)
        let root = try Certificate(der: try Fixture.bytes("ca/root-ca.der"))
        #expect(root.email == nil)
    }

    @Test func theChainIsKeptOutOfTheTokenUnlessAskedFor() throws {
        let env = try Env()
        let r = try env.manager.importPKCS12(try Fixture.bytes("identities/device-ds-ke.modern.p12"),
                                             password: Fixture.password, into: env.token.tokenID, key: env.key)
        #expect(r.chain.count == 2)
        let chainItems = try r.chain.map { try env.store.item($0, key: nil) }
        let keptApart = chainItems.allSatisfy { $0.isChainOnly }
        let authority = chainItems.allSatisfy { $0.attributes.ulong(CKA.certificateCategory) == CertificateCategory.authority }
        #expect(keptApart && authority)
        #expect(r.items.filter { $0.keptApart }.count == 2)
        // Still in the keychain for export and trust: the identity's chain is found.
        #expect(try env.manager.identities(in: env.token.tokenID, key: env.key).count == 1)

        // --with-chain: token objects, marked authority.
        let other = try env.manager.createSoftToken(label: "Chain", soPIN: soPIN, userPIN: userPIN)
        let otherKey = try env.store.unlockUser(other.tokenID, pin: userPIN)
        let w = try env.manager.importPKCS12(try Fixture.bytes("identities/device-ds-ke.modern.p12"), password: Fixture.password,
                                             options: ImportOptions(withChain: true), into: other.tokenID, key: otherKey)
        let wItems = try w.chain.map { try env.store.item($0, key: nil) }
        let shownAll = wItems.allSatisfy { !$0.isChainOnly }
        let noneApart = !w.items.contains { $0.keptApart }
        #expect(shownAll && noneApart)

        // A chain certificate kept apart becomes a token object when imported on its own, or again --with-chain.
        let intermediate = try Certificate(der: try Fixture.bytes("ca/intermediate-ca.der"))
        _ = try env.manager.importCertificate(intermediate, into: env.token.tokenID, key: env.key)
        let shown = try #require(try env.manager.findCertificate(intermediate, token: env.token.tokenID))
        #expect(try !env.store.item(shown, key: nil).isChainOnly)
        let again = try env.manager.importPKCS12(try Fixture.bytes("identities/device-ds-only.modern.p12"), password: Fixture.password,
                                                 options: ImportOptions(withChain: true), into: env.token.tokenID, key: env.key)
        let againItems = try again.chain.map { try env.store.item($0, key: nil) }
        let againShown = againItems.allSatisfy { !$0.isChainOnly }
        #expect(againShown)
    }

    /// A PEM bundle's CA certificates are the chain of its identity.
    @Test func aBundlesCACertificatesAreItsIdentitysChain() throws {
        let env = try Env()
        let (k, c) = try bundle("device-ds-ke")
        let ca = try Certificate(der: try Fixture.bytes("ca/intermediate-ca.der"))
        let results = try env.manager.importBundle(privateKeys: [k], certificates: [c, ca], into: env.token.tokenID, key: env.key)
        #expect(results.count == 1 && results[0].chain.count == 1)
        #expect(try env.store.item(results[0].chain[0], key: nil).isChainOnly)
        // Without an identity in the bundle a CA certificate is imported on its own, a token object.
        let other = try env.manager.createSoftToken(label: "CAs", soPIN: soPIN, userPIN: userPIN)
        let otherKey = try env.store.unlockUser(other.tokenID, pin: userPIN)
        let lone = try env.manager.importBundle(privateKeys: [], certificates: [ca], into: other.tokenID, key: otherKey)
        #expect(try !env.store.item(try #require(lone.first?.certificate), key: nil).isChainOnly)
    }
}
