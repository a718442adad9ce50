import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

struct SignVerifyTests {
    /// An EC P-256 private key object made from its components.
    func ecKey(_ f: Fixture, _ s: CK_SESSION_HANDLE) throws -> (CK_OBJECT_HANDLE, PrivateKey) {
        let k = try PrivateKey.generateEC(.p256)
        let h = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_EC), .bool(CKA_TOKEN, true),
            Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER), Attribute(CKA_VALUE, try k.ecPrivateScalar()),
            .bool(CKA_SIGN, true), Attribute(CKA_LABEL, Array("ec".utf8)), Attribute(CKA_ID, [1]),
        ])
        return (h, k)
    }

    @Test func ecdsaSignLengthQueryAndVerify() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (key, k) = try ecKey(f, s)
        #expect(try f.rt.getAttributeValue(session: s, object: key, types: [CKA_VALUE, CKA_EC_PARAMS])
                == [.sensitive, .value(ECCurve.p256.paramsDER)])

        let data = Array("hello".utf8)
        #expect(rv { _ = try f.rt.sign(session: s, data: data, capacity: nil) } == CKR_OPERATION_NOT_INITIALIZED)
        try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
        #expect(rv { try f.rt.signInit(session: s, mechanism: .ecdsa, key: key) } == CKR_OPERATION_ACTIVE)
        #expect(try f.rt.sign(session: s, data: data, capacity: nil) == .length(64))
        #expect(try f.rt.sign(session: s, data: data, capacity: 10) == .tooSmall(64))
        guard case .bytes(let sig) = try f.rt.sign(session: s, data: data, capacity: 64) else {
            Issue.record("no signature"); return
        }
        #expect(sig.count == 64)
        #expect(!s.isActiveIn(f.rt, .sign))
        #expect(try k.publicKey.verify(signature: sig, message: data, algorithm: .ecdsa(.sha256)))

        try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
        try f.rt.verify(session: s, data: data, signature: sig)
        var bad = sig
        bad[5] ^= 1
        try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
        #expect(rv { try f.rt.verify(session: s, data: data, signature: bad) } == CKR_SIGNATURE_INVALID)
        #expect(rv { try f.rt.verify(session: s, data: data, signature: bad) } == CKR_OPERATION_NOT_INITIALIZED)
        try f.rt.verifyInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
        #expect(rv { try f.rt.verify(session: s, data: data, signature: [1, 2]) } == CKR_SIGNATURE_LEN_RANGE)
    }

    @Test func multiPartSignAndErrorsEndTheOperation() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (key, k) = try ecKey(f, s)
        try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha384), key: key)
        try f.rt.signUpdate(session: s, part: Array("hel".utf8))
        try f.rt.signUpdate(session: s, part: Array("lo".utf8))
        #expect(try f.rt.signFinal(session: s, capacity: nil) == .length(64))
        guard case .bytes(let sig) = try f.rt.signFinal(session: s, capacity: 100) else { Issue.record("no signature"); return }
        #expect(try k.publicKey.verify(signature: sig, message: Array("hello".utf8), algorithm: .ecdsa(.sha384)))

        // A single-part call cannot finish a multi-part operation.
        try f.rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
        try f.rt.signUpdate(session: s, part: [1])
        #expect(rv { _ = try f.rt.sign(session: s, data: [2], capacity: 64) } == CKR_OPERATION_ACTIVE)
        #expect(rv { _ = try f.rt.signFinal(session: s, capacity: 64) } == CKR_OPERATION_NOT_INITIALIZED)

        try f.rt.signInit(session: s, mechanism: .ecdsa, key: key)
        #expect(rv { _ = try f.rt.sign(session: s, data: nil, capacity: 64) } == CKR_ARGUMENTS_BAD)
        #expect(rv { _ = try f.rt.sign(session: s, data: [1], capacity: 64) } == CKR_OPERATION_NOT_INITIALIZED)
    }

    @Test func keyChecksAtInit() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let (key, _) = try ecKey(f, s)
        #expect(rv { try f.rt.signInit(session: s, mechanism: .rsaPKCS, key: key) } == CKR_KEY_TYPE_INCONSISTENT)
        #expect(rv { try f.rt.signInit(session: s, mechanism: .ecdsa, key: 9999) } == CKR_KEY_HANDLE_INVALID)
        try f.rt.setAttributeValue(session: s, object: key, template: [.bool(CKA_SIGN, false)])
        #expect(rv { try f.rt.signInit(session: s, mechanism: .ecdsa, key: key) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        // After logout the private key says what is missing (issue 12; ObjectTable.loggedOut);
        // after the next login its old handle is invalid (C_Logout, PKCS #11 3.0 §5.6).
        try f.rt.logout(session: s)
        #expect(rv { try f.rt.signInit(session: s, mechanism: .ecdsa, key: key) } == CKR_USER_NOT_LOGGED_IN)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(rv { try f.rt.signInit(session: s, mechanism: .ecdsa, key: key) } == CKR_KEY_HANDLE_INVALID)
    }

    @Test func mechanismDecoding() throws {
        #expect(try Mechanism(type: CKM_SHA256_RSA_PKCS, parameter: nil) == .rsaPKCSWith(.sha256))
        #expect(rv { _ = try Mechanism(type: CKM_RC2_CBC, parameter: nil) } == CKR_MECHANISM_INVALID)
        let junk: [UInt8] = [1, 2, 3]
        #expect(rv { _ = try junk.withUnsafeBytes { try Mechanism(type: CKM_RSA_PKCS_PSS, parameter: $0) } } == CKR_MECHANISM_PARAM_INVALID)
        #expect(rv { _ = try junk.withUnsafeBytes { try Mechanism(type: CKM_ECDSA, parameter: $0) } } == CKR_MECHANISM_PARAM_INVALID)
        var params = CK_RSA_PKCS_PSS_PARAMS(hashAlg: CKM_SHA256, mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256), sLen: 32)
        let pss = try withUnsafeBytes(of: &params) { try Mechanism(type: CKM_RSA_PKCS_PSS, parameter: $0) }
        #expect(pss == .rsaPSS(PSSParameters(hash: .sha256, mgf1: .sha256, saltLength: 32)))
        #expect(rv { _ = try withUnsafeBytes(of: &params) { try Mechanism(type: CKM_SHA384_RSA_PKCS_PSS, parameter: $0) } }
                == CKR_MECHANISM_PARAM_INVALID)
    }

    @Test func digestAndRandom() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.ro(slot)
        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        #expect(try f.rt.digest(session: s, data: [], capacity: nil) == .length(32))
        #expect(try f.rt.digest(session: s, data: Array("abc".utf8), capacity: 32) == .bytes(DigestAlgorithm.sha256.hash(Array("abc".utf8))))
        #expect(try f.rt.generateRandom(session: s, count: 16).count == 16)
        #expect(rv { _ = try f.rt.generateRandom(session: 777, count: 1) } == CKR_SESSION_HANDLE_INVALID)
    }
}

extension CK_SESSION_HANDLE {
    func isActiveIn(_ rt: Runtime, _ kind: OperationKind) -> Bool {
        (try? rt.session(self).isActive(kind)) ?? false
    }
}
