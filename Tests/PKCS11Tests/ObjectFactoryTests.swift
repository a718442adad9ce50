#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

struct ObjectFactoryTests {
    static let fixtures: String = {
        var path = "\(#filePath)"
        for _ in 0..<2 { path = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) }
        return path + "/Fixtures/testdata/identities"
    }()

    func read(_ name: String) throws -> [UInt8] {
        guard let f = fopen(Self.fixtures + "/" + name, "rb") else { throw PKCS11Error.generalError }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            out += buf[..<n]
        }
        return out
    }

    @Test func certificateAttributesComeFromTheDER() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let der = try read("device-ds-ke.cert.der")
        let cert = try Certificate(der: der)
        let h = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_CERTIFICATE), .bool(CKA_TOKEN, true), Attribute(CKA_VALUE, der),
            Attribute(CKA_ID, [1]), Attribute(CKA_LABEL, Array("c".utf8)),
        ])
        let got = try f.rt.getAttributeValue(session: s, object: h,
                                             types: [CKA_SUBJECT, CKA_ISSUER, CKA_SERIAL_NUMBER, CKA_CERTIFICATE_TYPE, CKA_LABEL, CKA_PRIVATE])
        #expect(got == [.value(cert.subjectDER), .value(cert.issuerDER), .value(cert.serialNumberDER),
                        .value(ulong(CKC_X_509)), .value(Array("c".utf8)), .value(bool(false))])
        #expect(rv { _ = try f.rt.createObject(session: s, template: [.ulong(CKA_CLASS, CKO_CERTIFICATE), Attribute(CKA_VALUE, [1, 2, 3])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try f.rt.createObject(session: s, template: [.ulong(CKA_CLASS, CKO_CERTIFICATE)]) } == CKR_TEMPLATE_INCOMPLETE)
    }

    @Test func rsaKeyFromComponentsSignsPSS() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let k = try PrivateKey.generateRSA(bits: 2048)
        let c = try k.rsaPrivateComponents()
        let priv = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_RSA), .bool(CKA_TOKEN, true), .bool(CKA_SIGN, true),
            Attribute(CKA_MODULUS, c.modulus), Attribute(CKA_PUBLIC_EXPONENT, c.publicExponent),
            Attribute(CKA_PRIVATE_EXPONENT, c.d), Attribute(CKA_PRIME_1, c.p), Attribute(CKA_PRIME_2, c.q),
            Attribute(CKA_EXPONENT_1, c.dp), Attribute(CKA_EXPONENT_2, c.dq), Attribute(CKA_COEFFICIENT, c.qinv),
        ])
        let pub = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, CKK_RSA), .bool(CKA_VERIFY, true),
            Attribute(CKA_MODULUS, c.modulus), Attribute(CKA_PUBLIC_EXPONENT, c.publicExponent),
        ])
        #expect(try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_PRIME_1, CKA_MODULUS_BITS, CKA_SENSITIVE])
                == [.sensitive, .value(ulong(2048)), .value(bool(true))])
        let pss = PSSParameters(hash: .sha256, mgf1: .sha256, saltLength: 32)
        let data = Array("pss".utf8)
        try f.rt.signInit(session: s, mechanism: .rsaPSSWith(.sha256, pss), key: priv)
        guard case .bytes(let sig) = try f.rt.sign(session: s, data: data, capacity: 256) else { Issue.record("no signature"); return }
        #expect(sig.count == 256)
        try f.rt.verifyInit(session: s, mechanism: .rsaPSSWith(.sha256, pss), key: pub)
        try f.rt.verify(session: s, data: data, signature: sig)

        // CKM_RSA_PKCS takes a DigestInfo no longer than k - 11 bytes.
        try f.rt.signInit(session: s, mechanism: .rsaPKCS, key: priv)
        #expect(rv { _ = try f.rt.sign(session: s, data: [UInt8](repeating: 1, count: 250), capacity: 256) } == CKR_DATA_LEN_RANGE)
        // Raw PSS wants exactly the hash length.
        try f.rt.signInit(session: s, mechanism: .rsaPSS(pss), key: priv)
        #expect(rv { _ = try f.rt.sign(session: s, data: [1, 2, 3], capacity: 256) } == CKR_DATA_LEN_RANGE)
        // Incomplete component sets are refused.
        #expect(rv { _ = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_RSA), Attribute(CKA_MODULUS, c.modulus),
        ]) } == CKR_TEMPLATE_INCOMPLETE)
    }
}
