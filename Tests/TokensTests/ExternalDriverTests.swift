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

    /// A driver's variables (defect 9b): stored with it, replaced by set-env,
    /// gone with it; names that change the loader or keyshare are refused.
    @Test func driverEnvironmentStored() throws {
        let home = TempHome()
        let store = try home.store()
        try store.addDriver(name: "s", modulePath: "/m.so", environment: ["SOFTHSM2_CONF": "/a b/c=d.conf", "X_Y": ""])
        #expect(try store.drivers().first?.environment == ["SOFTHSM2_CONF": "/a b/c=d.conf", "X_Y": ""])
        try store.setDriverEnvironment(name: "s", ["OPENSC_CONF": "/o.conf"])
        #expect(try store.drivers().first?.environment == ["OPENSC_CONF": "/o.conf"])
        #expect(throws: KeychainError.self) { try store.setDriverEnvironment(name: "s", ["LD_PRELOAD": "/x.so"]) }
        #expect(throws: KeychainError.self) { try store.setDriverEnvironment(name: "none", [:]) }
        #expect(throws: KeychainError.self) { try store.addDriver(name: "t", modulePath: "/m.so", environment: ["PATH": "/"]) }
        try store.setDriverEnvironment(name: "s", [:])
        #expect(try store.drivers().first?.environment == [:])
        try store.setDriverEnvironment(name: "s", ["A": "1"])
        try store.removeDriver(name: "s")
        try store.addDriver(name: "s", modulePath: "/m.so")
        #expect(try store.drivers().first?.environment == [:])  // nothing left of the removed driver's
        for bad in ["LD_PRELOAD", "LD_LIBRARY_PATH", "GLIBC_TUNABLES", "KEYSHARE_HOME", "PATH", "HOME", "MALLOC_CHECK_",
                    "OPENSSL_CONF", "XDG_DATA_HOME", "1A", "A-B", "", "A=B"] {
            #expect(DriverEnvironment.refusal(bad) != nil, "\(bad)")
        }
        for good in ["SOFTHSM2_CONF", "OPENSC_CONF", "PCSCLITE_CSOCK_NAME", "TPM2_PKCS11_STORE", "_X", "x1"] {
            #expect(DriverEnvironment.refusal(good) == nil, "\(good)")
        }
    }

    /// The in-process rule: the stored variables for the call, the known
    /// configuration names of this process hidden, everything put back after;
    /// a child gets the same environment.
    /// (The environment is the process's: each step holds the lock the
    /// in-process loads of other suites take.)
    @Test func driverEnvironmentApplied() {
        func value(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        DriverEnvironment.lock.withLock {
            setenv("OPENSC_CONF", "/process/opensc.conf", 1)
            unsetenv("SOFTHSM2_CONF")
        }
        let seen = DriverEnvironment.applying(["SOFTHSM2_CONF": "/stored.conf"]) { (value("SOFTHSM2_CONF"), value("OPENSC_CONF")) }
        #expect(seen.0 == "/stored.conf" && seen.1 == nil)
        DriverEnvironment.lock.withLock {
            #expect(value("SOFTHSM2_CONF") == nil && value("OPENSC_CONF") == "/process/opensc.conf")
            let child = DriverEnvironment.childEnvironment(["SOFTHSM2_CONF": "/stored.conf", "LD_PRELOAD": "/x.so"])
            #expect(child.contains("SOFTHSM2_CONF=/stored.conf"))
            #expect(!child.contains { $0.hasPrefix("OPENSC_CONF=") || $0.hasPrefix("LD_PRELOAD=") })
            #expect(child.contains { $0.hasPrefix("PATH=") })
        }
        #expect(DriverEnvironment.applying(nil) { value("OPENSC_CONF") } == "/process/opensc.conf")
        _ = DriverEnvironment.lock.withLock { unsetenv("OPENSC_CONF") }
    }

    /// A module that does not exist or is not PKCS #11 is a clear error.
    @Test func probeErrors() {
        #expect { _ = try DriverSnapshot.probe(modulePath: "/no/such.so") } throws: { "\($0)".contains("no such file") }
        #expect { _ = try DriverSnapshot.probe(modulePath: "/etc/hostname") } throws: { "\($0)".contains("cannot load") }
    }
}
