import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto
@testable import Tokens

/// Issue 15: what a card's items are does not depend on the host's OpenSSL
/// state, and who may record that a card is present or gone (the presence
/// rule of docs/architecture.md).
@Suite struct CardPresenceTests {
    static let cardID = TokenID("pkcs11.w:6e8a00ff")!

    /// The bytes read without OpenSSL are the bytes earlier versions computed
    /// through it, so references of cards mirrored before stay valid.
    @Test func publicMaterialFromBytesEqualsOpenSSLs() throws {
        for pem in ["identities/auth-upn-old.cert.pem", "identities/device-old-ec.cert.pem"] {
            let cert = try Certificate(pem: try Fixture.text(pem))
            let k = try #require(CardPublicKey(certificate: cert.der))
            let pub = cert.publicKey
            if let n = pub.rsaModulus, let e = pub.rsaPublicExponent {
                #expect(k.keyType == CKK.rsa && k.modulus == n && k.exponent == e)
                #expect(k.material == n.drop { $0 == 0 } + [0] + e.drop { $0 == 0 })
                #expect(k.modulusBits == pub.bits)
            } else {
                #expect(k.keyType == CKK.ec && k.material == pub.ecPoint && k.ecPointDER == pub.ecPointDER)
            }
            let spki = try pub.spkiDER()
            #expect(k.spki == spki)
        }
        for curve in [ECCurve.p256, .p384, .p521] {
            let pub = try PrivateKey.generateEC(curve).publicKey
            let attrs: AttributeMap = [CKA.ecParams: curve.paramsDER, CKA.ecPoint: pub.ecPointDER!]
            let k = try #require(CardPublicKey(attributes: attrs))
            let spki = try pub.spkiDER()
            #expect(k.material == pub.ecPoint && k.spki == spki)
            // A module that hands out the raw point instead of the OCTET STRING.
            #expect(CardPublicKey(attributes: [CKA.ecParams: curve.paramsDER, CKA.ecPoint: pub.ecPoint!])?.material == pub.ecPoint)
        }
        let rsa = try PrivateKey.generateRSA(bits: 2048).publicKey
        let k = try #require(CardPublicKey(attributes: [CKA.modulus: [0] + rsa.rsaModulus!, CKA.publicExponent: rsa.rsaPublicExponent!]))
        let rsaSPKI = try rsa.spkiDER()
        #expect(k.spki == rsaSPKI && k.modulusBits == 2048)
        #expect(CardPublicKey(certificate: [0x30, 0x03, 0x02, 0x01]) == nil)  // truncated DER: nil, no crash
        #expect(CardPublicKey(attributes: [CKA.ecParams: ECCurve.p256.paramsDER, CKA.ecPoint: [0x04, 0x01, 0x04]]) == nil)
    }

    static func snapshot(present: Bool) throws -> DriverSnapshot {
        DriverSnapshot(tokens: present ? [try ExternalDriverTests.card(generated: try PrivateKey.generateEC(.p256))] : [])
    }

    /// A process that never saw the card cannot declare it gone; one that saw
    /// it and then does not can.
    @Test func onlyAWitnessRecordsARemoval() throws {
        let home = TempHome()
        let store = try home.store()
        let seesIt = DriverPoller(store: store, isolation: .inProcess)
        let blind = DriverPoller(store: store, isolation: .inProcess)
        let card = try Self.snapshot(present: true)
        #expect(try seesIt.apply(card, driver: "w").inserted == [Self.cardID])
        #expect(try blind.apply(DriverSnapshot(tokens: []), driver: "w").removed.isEmpty)
        #expect(try store.token(Self.cardID)?.present == true)
        // A failure is reported, never a removal.
        blind.recordFailure(driver: "w", reason: "C_Initialize failed with CKR 0x5")
        seesIt.recordFailure(driver: "w", reason: "the module crashed (signal 11)")
        #expect(try store.token(Self.cardID)?.present == true)
        #expect(try seesIt.apply(DriverSnapshot(tokens: []), driver: "w").removed == [Self.cardID])
        #expect(try store.token(Self.cardID)?.present == false)
    }

    /// While a designated watcher holds the presence lock, it alone writes;
    /// it may record a removal it did not see happen (it is the authority).
    @Test func theDesignatedWatcherDecidesAlone() throws {
        let home = TempHome()
        let store = try home.store()
        let owner = PresenceOwner(store: store)
        let watcher = DriverPoller(store: store, isolation: .inProcess, owner: owner)
        let other = DriverPoller(store: store, isolation: .inProcess)
        #expect(!PresenceOwner.watcherAlive(store: store))
        #expect(try watcher.apply(try Self.snapshot(present: true), driver: "w").inserted == [Self.cardID])
        #expect(owner.isHeld && PresenceOwner.watcherAlive(store: store))
        #expect(PresenceOwner(store: store).acquire() == false)  // a single one
        // Another process's view changes nothing while the watcher lives.
        let before = try store.changeCounter()
        #expect(try other.apply(DriverSnapshot(tokens: []), driver: "w") == ([], []))
        #expect(try other.apply(DriverSnapshot(tokens: [.init(label: "x", serial: "77", model: "", objects: [])]), driver: "w") == ([], []))
        #expect(try store.changeCounter() == before)
        // A fresh watcher (it never saw the card) still records it gone.
        owner.release()
        let next = PresenceOwner(store: store)
        #expect(try DriverPoller(store: store, isolation: .inProcess, owner: next).apply(DriverSnapshot(tokens: []), driver: "w").removed == [Self.cardID])
        next.release()
        #expect(!PresenceOwner.watcherAlive(store: store))
    }

    /// Content changes within a present card are brought in line under the
    /// same references (a new keyshare version, a relabelled object).
    @Test func changedContentIsReplacedUnderTheSameReferences() throws {
        // The home must outlive the store: its deinit deletes the directory,
        // and a store whose WAL vanished refuses to write (issue 12 item 11).
        let home = TempHome()
        defer { withExtendedLifetime(home) {} }
        let store = try home.store()
        var snap = try Self.snapshot(present: true)
        try ExternalDriver.mirror(snap, driver: "w", store: store)
        let refs = try store.references(token: Self.cardID)
        snap.tokens[0].objects[0][CKA.label] = Array("renamed".utf8)
        try ExternalDriver.mirror(snap, driver: "w", store: store)
        #expect(try store.references(token: Self.cardID) == refs)
        let labels = try store.find(ItemQuery(tokenID: Self.cardID), key: nil).map { String(decoding: $0.attributes[CKA.label] ?? [], as: UTF8.self) }
        #expect(labels.contains("renamed"))
        let before = try store.changeCounter()
        try ExternalDriver.mirror(snap, driver: "w", store: store)
        #expect(try store.changeCounter() == before)
    }
}
