import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// PKCS #11 3.2's signature-first verify and authenticated wrapping at the runtime level
/// (VerifySignature.swift, WrapAuthenticated.swift); the C ABI and the agent are
/// 74-pkcs11-3-2.sh's. Also run by `make unit-test-system-openssl` (OpenSSL 3.0).
struct VerifySignatureTests {
    @Test func signatureFirstVerifySharesTheVerifySlot() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (key, _) = try SignVerifyTests().ecKey(f, s)
        let data = Array("signature first".utf8)
        try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
        guard case .bytes(let sig) = try f.rt.sign(session: s, data: data, capacity: 64) else {
            Issue.record("no signature"); return
        }
        try f.rt.verifySignatureInit(session: s, mechanism: .ecdsaWith(.sha256), key: key, signature: sig)
        #expect(rv { try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: key) } == CKR_OPERATION_ACTIVE)
        try f.rt.verifySignatureUpdate(session: s, part: Array(data[..<5]))
        try f.rt.verifySignatureUpdate(session: s, part: Array(data[5...]))
        try f.rt.verifySignatureFinal(session: s)
        #expect(rv { try f.rt.verifySignatureFinal(session: s) } == CKR_OPERATION_NOT_INITIALIZED)
        var bad = sig
        bad[7] ^= 1
        try f.rt.verifySignatureInit(session: s, mechanism: .ecdsaWith(.sha256), key: key, signature: bad)
        #expect(rv { try f.rt.verifySignature(session: s, data: data) } == CKR_SIGNATURE_INVALID)
        try f.rt.verifySignatureInit(session: s, mechanism: .ecdsaWith(.sha256), key: key, signature: [1, 2])
        #expect(rv { try f.rt.verifySignature(session: s, data: data) } == CKR_SIGNATURE_LEN_RANGE)
        #expect(rv { try f.rt.verifySignatureInit(session: s, mechanism: .ecdsaWith(.sha256), key: key, signature: nil) }
                == CKR_ARGUMENTS_BAD)
        try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
        #expect(rv { try f.rt.verifySignature(session: s, data: data) } == CKR_OPERATION_NOT_INITIALIZED)
        #expect(try f.rt.sessionValidationFlags(session: s, type: 1) == 0)
    }

    @Test func authenticatedWrapTakesOnlyGCMWithTheCallsAssociatedData() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let kekValue = [UInt8](repeating: 0x42, count: 16)
        let kek = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, kekValue),
            .bool(CKA_WRAP, true), .bool(CKA_UNWRAP, false), .bool(CKA_DECRYPT, false),
        ])
        let target = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, [UInt8](repeating: 7, count: 16)),
            .bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true),
        ])
        let iv = [UInt8](repeating: 1, count: 12)
        let gcm = Mechanism.aesGCM(GCMParameters(iv: iv, aad: [], tagBytes: 16))
        let ad = Array("context".utf8)
        guard case .bytes(let blob) = try f.rt.wrapKeyAuthenticated(
            session: s, mechanism: gcm, wrappingKey: kek, key: target, associatedData: ad, capacity: 64) else {
            Issue.record("no blob"); return
        }
        let (ct, tag) = try AESGCM.encrypt(key: kekValue, iv: iv, plaintext: [UInt8](repeating: 7, count: 16), aad: ad,
                                           tagLength: 16)
        #expect(blob == ct + tag)
        #expect(rv { _ = try f.rt.wrapKeyAuthenticated(session: s, mechanism: .aesKeyWrap(pad: false), wrappingKey: kek,
                                                        key: target, associatedData: ad, capacity: 64) } == CKR_MECHANISM_INVALID)
        let withAAD = Mechanism.aesGCM(GCMParameters(iv: iv, aad: [1], tagBytes: 16))
        #expect(rv { _ = try f.rt.wrapKeyAuthenticated(session: s, mechanism: withAAD, wrappingKey: kek, key: target,
                                                        associatedData: ad, capacity: 64) } == CKR_MECHANISM_PARAM_INVALID)
    }
}
