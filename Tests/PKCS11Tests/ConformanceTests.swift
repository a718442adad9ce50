import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// Issue 13, at the Runtime level (the C-level checks, argument order and
/// argument errors, are in Tests/integration/56-conformance.sh): the
/// single-part/multi-part rules of PKCS #11 3.0 §5.8, AES-GCM parameters and
/// streaming, secret-key usage defaults, the wrap policy and the versions.
struct ConformanceTests {
    func aes(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ flags: [CK_ATTRIBUTE_TYPE: Bool] = [:],
             extractable: Bool = false) throws -> CK_OBJECT_HANDLE {
        try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                             template: [.ulong(CKA_VALUE_LEN, 16), .bool(CKA_EXTRACTABLE, extractable)]
                                 + flags.map { .bool($0.key, $0.value) })
    }

    func bytes(_ r: OutputResult) -> [UInt8] {
        if case .bytes(let b) = r { return b }
        Issue.record("expected bytes, got \(r)")
        return []
    }

    /// §5.8: "C_Encrypt ... MUST be called after C_EncryptInit without
    /// intervening C_EncryptUpdate calls", and a call that returns an error
    /// ends the operation: after a single-part length query, C_*Update and
    /// C_*Final are the wrong calls.
    @Test func singlePartLengthQueryIsFinishedBySingleCall() throws {
        let (f, s) = try loggedIn()
        let key = try aes(f, s, [CKA_ENCRYPT: true])
        let m = Mechanism.aesCBC(iv: [UInt8](repeating: 0, count: 16), pad: true)
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        #expect(try f.rt.encrypt(session: s, data: [1, 2, 3], capacity: nil) == .length(16))
        #expect(rv { _ = try f.rt.encryptUpdate(session: s, part: [1], capacity: 64) } == CKR_OPERATION_ACTIVE)
        #expect(try !f.rt.session(s).isActive(.encrypt))
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        #expect(try f.rt.encrypt(session: s, data: [1, 2, 3], capacity: 2) == .tooSmall(16))
        #expect(rv { _ = try f.rt.encryptFinal(session: s, capacity: 64) } == CKR_OPERATION_ACTIVE)
        try f.rt.encryptInit(session: s, mechanism: m, key: key)
        #expect(try f.rt.encrypt(session: s, data: [1, 2, 3], capacity: nil) == .length(16))
        #expect(bytes(try f.rt.encrypt(session: s, data: [1, 2, 3], capacity: 16)).count == 16)

        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        #expect(try f.rt.digest(session: s, data: [1], capacity: nil) == .length(32))
        #expect(rv { try f.rt.digestUpdate(session: s, part: [1]) } == CKR_OPERATION_ACTIVE)
        #expect(try !f.rt.session(s).isActive(.digest))
    }

    @Test func gcmIvLenIsAuthoritativeAndEncryptionStreams() throws {
        let (f, s) = try loggedIn()
        let key = try aes(f, s, [CKA_ENCRYPT: true, CKA_DECRYPT: true])
        var iv = [UInt8](repeating: 5, count: 12)
        func gcm(bits: CK_ULONG) throws -> Mechanism {
            var p = iv.withUnsafeMutableBufferPointer {
                CK_GCM_PARAMS(pIv: $0.baseAddress, ulIvLen: 12, ulIvBits: bits, pAAD: nil, ulAADLen: 0, ulTagBits: 128)
            }
            return try withUnsafeBytes(of: &p) { try Mechanism(type: CKM_AES_GCM, parameter: $0) }
        }
        // v3.0 errata: ulIvBits is not to be used for the IV length.
        #expect(try gcm(bits: 12) == gcm(bits: 96))
        #expect(try gcm(bits: 0) == gcm(bits: 96))
        let plain = [UInt8](repeating: 7, count: 40)
        try f.rt.encryptInit(session: s, mechanism: try gcm(bits: 96), key: key)
        #expect(try f.rt.encryptUpdate(session: s, part: plain, capacity: nil) == .length(40))
        let streamed = bytes(try f.rt.encryptUpdate(session: s, part: plain, capacity: 40))
        #expect(streamed.count == 40)
        let tag = bytes(try f.rt.encryptFinal(session: s, capacity: 16))
        try f.rt.encryptInit(session: s, mechanism: try gcm(bits: 96), key: key)
        #expect(bytes(try f.rt.encrypt(session: s, data: plain, capacity: 56)) == streamed + tag)
    }

    /// SoftHSM2's defaults (KeyUsagePolicy.secretKeyDefaults) for created and generated keys.
    @Test func secretKeyUsageDefaults() throws {
        let (f, s) = try loggedIn()
        let created = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), Attribute(CKA_VALUE, [1, 2, 3, 4]),
        ])
        let generated = try aes(f, s)
        let types = [CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_VERIFY, CKA_WRAP, CKA_UNWRAP, CKA_DERIVE]
        let expected: [AttributeLookup] = [1, 1, 1, 1, 1, 1, 0].map { .value([$0]) }
        #expect(try f.rt.getAttributeValue(session: s, object: created, types: types) == expected)
        #expect(try f.rt.getAttributeValue(session: s, object: generated, types: types) == expected)
        // A template's own choice wins.
        let chosen = try aes(f, s, [CKA_WRAP: false, CKA_DERIVE: true])
        #expect(try f.rt.getAttributeValue(session: s, object: chosen, types: [CKA_WRAP, CKA_DERIVE]) == [.value([0]), .value([1])])
    }

    /// KeyUsagePolicy: each rule with the ordinary use it allows.
    @Test func wrapPolicyRules() throws {
        let (f, s) = try loggedIn()
        let kw = try Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
        let iv = [UInt8](repeating: 0, count: 16)
        let everything = try aes(f, s, [CKA_ENCRYPT: true, CKA_DECRYPT: true, CKA_WRAP: true, CKA_UNWRAP: true])
        let kek = try aes(f, s, [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true, CKA_UNWRAP: true])
        let data = try aes(f, s, [CKA_ENCRYPT: true, CKA_DECRYPT: true, CKA_WRAP: false, CKA_UNWRAP: false], extractable: true)
        // Ordinary use: a key with every flag decrypts; a KEK wraps and unwraps a data key.
        try f.rt.decryptInit(session: s, mechanism: .aesCBC(iv: iv, pad: false), key: everything)
        _ = try f.rt.decrypt(session: s, data: iv, capacity: 16)
        let blob = bytes(try f.rt.wrapKey(session: s, mechanism: kw, wrappingKey: kek, key: data, capacity: 64))
        _ = try f.rt.unwrapKey(session: s, mechanism: kw, unwrappingKey: kek, wrapped: blob, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES)])
        // Rule 1: no sensitive key under a key that can decrypt.
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: kw, wrappingKey: everything, key: data, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        // Rule 2: no sensitive key under a key whose value was known outside.
        let imported = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, [UInt8](repeating: 9, count: 16)),
            .bool(CKA_ENCRYPT, false), .bool(CKA_DECRYPT, false), .bool(CKA_WRAP, true), .bool(CKA_UNWRAP, false),
        ])
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: kw, wrappingKey: imported, key: data, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        // A key that can encrypt may unwrap (OpenSC's --usage-wrap keys do), but a
        // key planted that way is not local, so rule 2 keeps it from wrapping S.
        let open = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, [UInt8](repeating: 4, count: 16)),
            .bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true),
        ])
        let openBlob = bytes(try f.rt.wrapKey(session: s, mechanism: kw, wrappingKey: everything, key: open, capacity: 64))
        let planted = try f.rt.unwrapKey(session: s, mechanism: kw, unwrappingKey: everything, wrapped: openBlob, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_WRAP, true)])
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: kw, wrappingKey: planted, key: data, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
        // Rule 3: the four flags are fixed, for the key and its copies.
        #expect(rv { try f.rt.setAttributeValue(session: s, object: kek, template: [.bool(CKA_DECRYPT, true)]) }
                == CKR_ATTRIBUTE_READ_ONLY)
        #expect(rv { _ = try f.rt.copyObject(session: s, object: kek, template: [.bool(CKA_WRAP, false)]) }
                == CKR_ATTRIBUTE_READ_ONLY)
        try f.rt.setAttributeValue(session: s, object: kek, template: [.bool(CKA_WRAP, true), .bool(CKA_SIGN, false)])
        // Rule 4: unwrapped under a key that can wrap, a key is never readable.
        #expect(rv { _ = try f.rt.unwrapKey(session: s, mechanism: kw, unwrappingKey: kek, wrapped: blob, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_SENSITIVE, false),
            .bool(CKA_EXTRACTABLE, true)]) } == CKR_TEMPLATE_INCONSISTENT)
        _ = try f.rt.unwrapKey(session: s, mechanism: kw, unwrappingKey: kek, wrapped: blob, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_SENSITIVE, false)])
        // Rule 5: a sensitive key that can wrap is not wrapped (unless under a trusted key).
        let wrapper = try aes(f, s, [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true], extractable: true)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: kw, wrappingKey: kek, key: wrapper, capacity: 64) }
                == CKR_KEY_NOT_WRAPPABLE)
    }

    @Test func oneVersionEverywhere() {
        #expect(KeyshareVersion.string == "0.3.0")
        #expect(ModuleInfo.libraryVersion.major == KeyshareVersion.major)
        #expect(ModuleInfo.libraryVersion.minor == KeyshareVersion.minor)
    }
}
