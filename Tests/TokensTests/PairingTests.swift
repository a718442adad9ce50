import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto
@testable import Tokens

/// Certificates join the key pair of their public key (issue 14 item 1):
/// enrolment makes the key first under an ID of the user's choice
/// (`pkcs11-tool --keypairgen --id 01`), the certificate comes later.
@Suite struct PairingTests {
    let cert: Certificate
    let key: PrivateKey

    init() throws {
        cert = try Certificate(der: try Fixture.bytes("identities/auth-upn-new.cert.der"))
        key = try PrivateKey(pem: try Fixture.text("identities/auth-upn-new.key.pem"))
    }

    /// The key pair as C_GenerateKeyPair with CKA_ID 01 leaves it.
    private func keyPairWithID01(_ env: Env, label: String = "enrolled") throws -> (PersistentReference, PersistentReference) {
        let t = env.token.tokenID
        let priv = try env.store.add(token: t, itemClass: .privateKey, attributes: ObjectTemplates.privateKey(
            key, label: label, id: [0x01], extractable: false, local: true), key: env.key)
        let pub = try env.store.add(token: t, itemClass: .publicKey, attributes: ObjectTemplates.publicKey(
            key.publicKey, label: label, id: [0x01], local: true), key: env.key)
        return (priv, pub)
    }

    @Test func importedCertificateTakesTheKeyPairsIDAndLabel() throws {
        let env = try Env()
        let (priv, pub) = try keyPairWithID01(env)
        let r = try env.manager.importCertificate(cert, into: env.token.tokenID, key: env.key)
        #expect(r.id == [0x01])
        #expect(r.label == "enrolled")
        let item = try env.store.item(try #require(r.certificate), key: nil)
        #expect(item.attributes[CKA.id] == [0x01])
        #expect(item.attributes.string(CKA.label) == "enrolled")
        #expect(item.attributes.ulong(CKA.certificateCategory) == CertificateCategory.tokenUser)
        let ids = try env.manager.identities(in: env.token.tokenID, key: env.key)
        #expect(ids.count == 1)
        #expect(ids.first?.privateKeyReference == priv)
        #expect(ids.first?.publicKeyReference == pub)
    }

    @Test func givenLabelWinsAndAConflictingIDIsRefused() throws {
        let env = try Env()
        _ = try keyPairWithID01(env)
        #expect(throws: ImportError.idMismatch(given: "02", pair: "01")) {
            _ = try env.manager.importCertificate(cert, options: ImportOptions(id: [0x02]), into: env.token.tokenID, key: env.key)
        }
        let r = try env.manager.importCertificate(cert, options: ImportOptions(label: "mine", id: [0x01]),
                                                  into: env.token.tokenID, key: env.key)
        #expect(r.label == "mine" && r.id == [0x01])
    }

    @Test func anIDUsedByAnotherKeyIsRefused() throws {
        let env = try Env()
        _ = try keyPairWithID01(env)
        let other = try Certificate(der: try Fixture.bytes("identities/device-ds-ke.cert.der"))
        let counts = try env.rowCounts()
        #expect(throws: ImportError.self) {
            _ = try env.manager.importCertificate(other, options: ImportOptions(id: [0x01]), into: env.token.tokenID, key: env.key)
        }
        #expect(try env.rowCounts() == counts)
    }

    /// Certificates stored before the fix (CKA_ID = SHA-1 of the key) still
    /// form identities; a key that only shares an ID does not.
    @Test func identitiesPairByPublicKeyNeverByIDAlone() throws {
        let env = try Env()
        let t = env.token.tokenID
        let (priv, _) = try keyPairWithID01(env)
        _ = try env.store.add(token: t, itemClass: .certificate, attributes: ObjectTemplates.certificate(
            cert, label: "old", id: try cert.publicKey.keyIdentifier()), key: nil)
        let other = try Certificate(der: try Fixture.bytes("identities/device-ds-ke.cert.der"))
        _ = try env.store.add(token: t, itemClass: .certificate, attributes: ObjectTemplates.certificate(
            other, label: "stranger", id: [0x01]), key: nil)
        let ids = try env.manager.identities(in: t, key: env.key)
        #expect(ids.first { $0.label == "old" }?.privateKeyReference == priv)
        #expect(ids.first { $0.label == "stranger" }?.privateKeyReference == nil)
    }

    /// The C_CreateObject hook: a certificate created without CKA_ID takes
    /// the pair's ID (and label when none was given); with an ID, it keeps it.
    @Test func createObjectHookJoinsTheKeyPair() throws {
        let env = try Env()
        _ = try keyPairWithID01(env)
        let built = ObjectTemplates.certificate(cert, label: "", id: [])
        let template: AttributeMap = [CKA.class: AttributeCoding.ulong(CKO.certificate), CKA.value: cert.der]
        let joined = try KeyPairing.certificateJoiningKeyPair(built, template: template, token: env.token.tokenID,
                                                               store: env.store, key: nil)
        #expect(joined[CKA.id] == [0x01])
        #expect(joined.string(CKA.label) == "enrolled")
        var withID = template
        withID[CKA.id] = [0x07]
        let kept = try KeyPairing.certificateJoiningKeyPair(built, template: withID, token: env.token.tokenID,
                                                             store: env.store, key: nil)
        #expect(kept[CKA.id] == [])
        var withLabel = template
        withLabel[CKA.label] = Array("given".utf8)
        let labelled = try KeyPairing.certificateJoiningKeyPair(
            ObjectTemplates.certificate(cert, label: "given", id: []), template: withLabel, token: env.token.tokenID,
            store: env.store, key: nil)
        #expect(labelled[CKA.id] == [0x01] && labelled.string(CKA.label) == "given")
    }

    /// A key imported after its certificate joins the certificate's ID.
    @Test func keyImportedAfterItsCertificateJoinsIt() throws {
        let env = try Env()
        let t = env.token.tokenID
        let c = try env.manager.importCertificate(cert, options: ImportOptions(label: "card", id: [0xAB]), into: t, key: env.key)
        let k = try env.manager.importPrivateKey(key, options: ImportOptions(), into: t, key: env.key)
        #expect(k.id == [0xAB] && k.label == "card")
        #expect(try env.manager.identities(in: t, key: env.key).first?.privateKeyReference == k.privateKey)
        #expect(c.id == k.id)
    }

    /// Issue 14 item 2: a PEM bundle's key and certificate form an identity,
    /// and every certificate of the bundle is imported and reported; the CA
    /// certificates as the identity's chain (issue 27: kept out of the token).
    @Test func bundleImportsEveryItem() throws {
        let env = try Env()
        let t = env.token.tokenID
        let chain = try Certificate.parseAll(pem: try Fixture.text("ca/ca-chain.pem"))
        let results = try env.manager.importBundle(privateKeys: [key], certificates: chain + [cert], into: t, key: env.key)
        #expect(results.count == 1 && results[0].chain.count == chain.count)
        #expect(results[0].certificate != nil && results[0].privateKey != nil && results[0].publicKey != nil)
        #expect(results.flatMap(\.items).filter(\.created).count == 3 + chain.count)
        #expect(try env.store.count(token: t, itemClass: .certificate) == 1 + chain.count)
        let again = try env.manager.importBundle(privateKeys: [key], certificates: [cert] + chain, into: t, key: env.key)
        #expect(again.allSatisfy { $0.duplicate })
        #expect(throws: ImportError.self) {
            _ = try env.manager.importBundle(privateKeys: [], certificates: [cert, try Certificate(der: try Fixture.bytes(
                "identities/device-ds-ke.cert.der"))], options: ImportOptions(label: "x"), into: t, key: env.key)
        }
    }

    /// Issue 14 item 7: a duplicate names the objects as stored (label and
    /// reference), not a hash computed from the new input.
    @Test func duplicateNamesTheStoredItems() throws {
        let env = try Env()
        let t = env.token.tokenID
        let p12 = try env.manager.importPKCS12(try Fixture.bytes("identities/signature-ds-email.modern.p12"), password: Fixture.password,
                                               into: t, key: env.key)
        let sameKey = try PrivateKey(pem: try Fixture.text("identities/signature-ds-email.key.pem"))
        let again = try env.manager.importPrivateKey(sameKey, label: nil, into: t, key: env.key)
        #expect(again.duplicate)
        #expect(again.label == p12.label)
        #expect(again.items.map(\.reference) == [p12.privateKey, p12.publicKey].compactMap { $0 })
        #expect(again.items.allSatisfy { $0.label == p12.label })
    }
}
