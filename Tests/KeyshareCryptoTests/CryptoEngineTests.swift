import Testing
import KeyshareCrypto

/// The crypto engine (issue 18): which OpenSSL runs, and that the legacy provider a PKCS #12 import
/// loads is that OpenSSL's own (with the bundled 3.5, never Debian 12's 3.0 legacy.so).
@Suite struct CryptoEngineTests {
    @Test func legacyProviderMatchesTheEngine() throws {
        let legacy = try Fixtures.bytes("variants/rc2-40.p12")
        let c = try PKCS12.parse(legacy, password: "Encrypt-2025")
        #expect(c.privateKey != nil)
        let providers = CryptoEngine.loadedProviders()
        #expect(providers.count >= 2, "default and legacy: \(providers)")
        let minor = CryptoEngine.version.split(separator: ".").prefix(2)
        for p in providers {
            #expect(p.version.split(separator: ".").prefix(2) == minor,
                    "provider \(p.name) is \(p.version), the engine \(CryptoEngine.version)")
        }
        #expect(providers.contains { $0.name == "legacy" || $0.name.hasSuffix("/legacy.so") })
    }

    @Test func engineIsNamed() {
        #expect(CryptoEngine.name.hasPrefix("OpenSSL 3."))
        // The bundle exists only to bring the 3.5 algorithms.
        if CryptoEngine.isBundled { #expect(CryptoEngine.hasPostQuantum) }
    }

    /// `keyshare --version` says how old the bundled engine is (issue 28): the release date OpenSSL
    /// states is read, and the age counts whole days from it.
    @Test func releaseDateAndAge() throws {
        let date = try #require(CryptoEngine.releaseDate)
        #expect(date.split(separator: " ").count == 3)
        let base = 1_800_000_000
        let a = try #require(CryptoEngine.releaseAge(now: base))
        #expect(CryptoEngine.releaseAge(now: base + 86400) == a + 1)
        #expect(CryptoEngine.summary(now: base).contains(CryptoEngine.name))
        if CryptoEngine.isBundled { #expect(CryptoEngine.summary(now: base).contains("\(a) days ago")) }
    }
}
