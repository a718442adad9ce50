import Testing
import KeyshareCrypto

/// The PKCS #11 module calls in from many host threads at once: shared keys,
/// the lazy legacy-provider load and OpenSSL's error queue must all cope.
@Suite struct ConcurrencyTests {
    @Test func parallelSigningAndParsing() async throws {
        let legacy = try Fixtures.bytes("variants/rc2-40.p12")
        let modern = try Fixtures.bytes("identities/auth-upn-new.modern.p12")
        let msg = Array("concurrent".utf8)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<16 {
                group.addTask {
                    let k = i % 2 == 0 ? Keys.p256 : Keys.rsa
                    let alg: SignatureAlgorithm = i % 2 == 0 ? .ecdsa(.sha256) : .rsaPSS(.sha256, mgf1: .sha256, saltLength: 32)
                    let sig = try k.sign(message: msg, algorithm: alg)
                    guard try k.publicKey.verify(signature: sig, message: msg, algorithm: alg) else { return false }
                    let c = try PKCS12.parse(i % 3 == 0 ? legacy : modern,
                                             password: i % 3 == 0 ? "Encrypt-2025" : "B:M>A)G[{qso0ZX,dhHD843j7?BA/!.E")
                    // A failure on one thread must not leak its error text into another's.
                    do {
                        _ = try PKCS12.parse(modern, password: "wrong")
                        return false
                    } catch let e as CryptoError where e.kind == .wrongPassword {}
                    return c.privateKey != nil
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }
}
