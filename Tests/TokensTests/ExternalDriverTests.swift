import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto
@testable import Tokens

/// The PKCS #11 driver's mirroring, fed with made-up snapshots (the real
/// module round trip is in Tests/integration/40-tokens.sh with SoftHSM2).
@Suite struct ExternalDriverTests {
    static func card(serial: String = "6e8a00ff", generated: PrivateKey) throws -> DriverSnapshot.Token {
        let cert = try Certificate(pem: try Fixture.text("identities/auth-upn-old.cert.pem"))
        let pub = generated.publicKey
        let ecPub: AttributeMap = [
            CKA.class: AttributeCoding.ulong(CKO.publicKey), CKA.keyType: AttributeCoding.ulong(CKK.ec),
            CKA.id: [2], CKA.label: Array("ec".utf8), CKA.ecParams: pub.curve!.paramsDER, CKA.ecPoint: pub.ecPointDER!,
        ]
        let certObj: AttributeMap = [
            CKA.class: AttributeCoding.ulong(CKO.certificate), CKA.id: [3], CKA.label: Array("cert".utf8),
            CKA.value: cert.der, CKA.subject: cert.subjectDER,
        ]
        return DriverSnapshot.Token(label: "card", serial: serial, model: "SoftHSM v2", objects: [ecPub, certObj])
    }

    @Test func mirrorCopiesPublicObjectsAndMakesKeyProxiesWithoutKeyMaterial() throws {
        let home = TempHome()
        let store = try home.store()
        let key = try PrivateKey.generateEC(.p256)
        let snap = DriverSnapshot(tokens: [try Self.card(generated: key)])
        let (inserted, _) = try ExternalDriver.mirror(snap, driver: "softhsm2", store: store)
        let id = TokenID("pkcs11.softhsm2:6e8a00ff")!
        #expect(inserted == [id])
        let items = try store.find(ItemQuery(tokenID: id), key: nil)
        #expect(items.count == 4)  // public key, certificate, a private key proxy for each
        let proxies = items.filter { $0.itemClass == .privateKey }
        #expect(proxies.count == 2)
        for p in proxies {
            #expect(p.attributes[CKA.keysharePKCS8] == nil && p.attributes[CKA.value] == nil)
            #expect(p.attributes[CKA.keyshareExternal] == p.attributes[CKA.id])
            #expect(p.attributes.bool(CKA.sign) == true && p.attributes.bool(CKA.extractable) == false)
        }
        #expect(items.allSatisfy { $0.reference.isDerived })
        #expect(!contains(home.allBytes(), try key.ecPrivateScalar()))

        // The same poll again writes nothing.
        let before = try store.changeCounter()
        try ExternalDriver.mirror(snap, driver: "softhsm2", store: store)
        #expect(try store.changeCounter() == before)

        // The card goes: every item is deleted, the token stays known (slot kept).
        let slot = try store.token(id)!.slotID
        let refs = Set(items.map(\.reference))
        let (_, removed) = try ExternalDriver.mirror(DriverSnapshot(tokens: []), driver: "softhsm2", store: store)
        #expect(removed == [id])
        #expect(try store.count(token: id) == 0)
        for r in refs { #expect(throws: KeychainError.itemNotFound) { _ = try store.item(r, key: nil) } }

        // Same card, same keys: same token ID, slot and references.
        try ExternalDriver.mirror(snap, driver: "softhsm2", store: store)
        #expect(try store.token(id)?.slotID == slot)
        #expect(Set(try store.find(ItemQuery(tokenID: id), key: nil).map(\.reference)) == refs)
    }

    @Test func otherDriversAndSoftTokensAreLeftAlone() throws {
        let env = try Env()
        let snap = DriverSnapshot(tokens: [try Self.card(generated: try PrivateKey.generateEC(.p256))])
        try ExternalDriver.mirror(snap, driver: "a", store: env.store)
        try ExternalDriver.mirror(DriverSnapshot(tokens: []), driver: "b", store: env.store)
        #expect(try env.store.token(TokenID("pkcs11.a:6e8a00ff")!)?.present == true)
        #expect(try env.store.token(env.token.tokenID)?.present == true)
        #expect(throws: KeychainError.self) { try env.store.withdrawExternalToken(env.token.tokenID) }
    }

    @Test func snapshotTextRoundTripsAndRejectsTruncation() throws {
        let snap = DriverSnapshot(tokens: [try Self.card(generated: try PrivateKey.generateEC(.p256)),
                                           .init(label: "", serial: "x y", model: "", objects: [[:]])])
        let text = snap.serialized()
        #expect(DriverSnapshot(serialized: text) == snap)
        #expect(DriverSnapshot(serialized: String(text.dropLast(5))) == nil)
        #expect(DriverSnapshot(serialized: "garbage\nEND\n") == nil)
    }

    @Test func driverNamesAndConfiguration() throws {
        #expect(ExternalDriver.defaultName(modulePath: "/usr/lib/softhsm/libsofthsm2.so") == "softhsm2")
        #expect(ExternalDriver.defaultName(modulePath: "/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so") == "opensc-pkcs11")
        #expect(!ExternalDriver.validName("a b") && ExternalDriver.validName("softhsm2"))
        let home = TempHome()  // held: the store's directory must outlive the store
        let store = try home.store()
        try store.addDriver(name: "x", modulePath: "/m.so")
        #expect(throws: KeychainError.self) { try store.addDriver(name: "x", modulePath: "/n.so") }
        try store.setDriverStatus(name: "x", "failed: hung")
        #expect(try store.drivers() == [.init(name: "x", modulePath: "/m.so", status: "failed: hung")])
        try store.removeDriver(name: "x")
        #expect(try store.drivers().isEmpty)
    }

    /// A module that does not exist or is not PKCS #11 is a clear error.
    @Test func probeErrors() {
        #expect { _ = try DriverSnapshot.probe(modulePath: "/no/such.so") } throws: { "\($0)".contains("no such file") }
        #expect { _ = try DriverSnapshot.probe(modulePath: "/etc/hostname") } throws: { "\($0)".contains("cannot load") }
    }
}
