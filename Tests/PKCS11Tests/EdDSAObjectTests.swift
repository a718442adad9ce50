import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// An Ed25519 private key given by value (C_CreateObject, as benchmarks and
/// key-migration tools do) must sign like a generated one.
struct EdDSAObjectTests {
    @Test func createdEd25519KeySignsAndVerifies() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let k = try PrivateKey.generateEd25519()
        let edParams: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70]
        let key = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC_EDWARDS), .bool(CKA_TOKEN, true),
            Attribute(CKA_EC_PARAMS, edParams), Attribute(CKA_VALUE, try k.ed25519PrivateRaw()),
            .bool(CKA_SIGN, true), Attribute(CKA_LABEL, Array("ed".utf8)),
        ])
        let data = Array("hello".utf8)
        try f.rt.signInit(session: s, mechanism: .eddsa, key: key)
        guard case .bytes(let sig) = try f.rt.sign(session: s, data: data, capacity: 64) else {
            Issue.record("no signature"); return
        }
        #expect(try k.publicKey.verify(signature: sig, message: data, algorithm: .ed25519))
        #expect(rv {
            _ = try f.rt.createObject(session: s, template: [
                .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC_EDWARDS),
                Attribute(CKA_EC_PARAMS, edParams), Attribute(CKA_VALUE, [1, 2, 3]),
            ])
        } == CKR_ATTRIBUTE_VALUE_INVALID)
    }
}
