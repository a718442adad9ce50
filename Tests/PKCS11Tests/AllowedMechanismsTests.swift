import CPKCS11
import Keychain
@testable import PKCS11
import Testing

/// CKA_ALLOWED_MECHANISMS (PKCS #11 3.0 base §4.7, Common key attributes:
/// "A list of mechanisms allowed to be used with this key"; a
/// CK_MECHANISM_TYPE array). Stored, returned, copied and changed; a
/// non-empty list refuses every other mechanism with CKR_MECHANISM_INVALID
/// (AllowedMechanisms.swift). The C entry points' wiring is checked by
/// Tests/integration/c/conformance.c (allowed_mechanisms), in both modes.
struct AllowedMechanismsTests {
    func list(_ types: CK_MECHANISM_TYPE...) -> Attribute {
        Attribute(CKA_ALLOWED_MECHANISMS, types.flatMap { ulong($0) })
    }

    func aes(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ extra: [Attribute]) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES),
            Attribute(CKA_VALUE, [UInt8](repeating: 7, count: 16)), .bool(CKA_ENCRYPT, true),
        ] + extra)
    }

    @Test func storedReturnedAndChecked() throws {
        let (f, s) = try loggedIn()
        let k = try aes(f, s, [list(CKM_AES_CBC_PAD, CKM_SHA256)])
        #expect(try f.rt.getAttributeValue(session: s, object: k, types: [CKA_ALLOWED_MECHANISMS])[0]
                == .value(ulong(CKM_AES_CBC_PAD) + ulong(CKM_SHA256)))
        let session = try f.rt.session(s)
        #expect(rv { try f.rt.checkAllowedMechanism(session: session, key: k, mechanism: CKM_AES_ECB) }
                == CKR_MECHANISM_INVALID)
        try f.rt.checkAllowedMechanism(session: session, key: k, mechanism: CKM_AES_CBC_PAD)
        // A handle that does not resolve is left to the Init.
        try f.rt.checkAllowedMechanism(session: session, key: 0x7fff_0000, mechanism: CKM_AES_ECB)
        // No list, or an empty one: every mechanism.
        let open = try aes(f, s, [])
        try f.rt.checkAllowedMechanism(session: session, key: open, mechanism: CKM_AES_ECB)
        try f.rt.setAttributeValue(session: s, object: k, template: [Attribute(CKA_ALLOWED_MECHANISMS, [])])
        try f.rt.checkAllowedMechanism(session: session, key: k, mechanism: CKM_AES_ECB)
        // Modifiable (no footnote in the table), as SoftHSM2 allows.
        try f.rt.setAttributeValue(session: s, object: k, template: [list(CKM_AES_ECB)])
        #expect(rv { try f.rt.checkAllowedMechanism(session: session, key: k, mechanism: CKM_AES_CBC_PAD) }
                == CKR_MECHANISM_INVALID)
        // A copy takes the template's list.
        let c = try f.rt.copyObject(session: s, object: k, template: [list(CKM_AES_CTR)])
        #expect(rv { try f.rt.checkAllowedMechanism(session: session, key: c, mechanism: CKM_AES_ECB) }
                == CKR_MECHANISM_INVALID)
    }

    @Test func aValueThatIsNoMechanismArrayIsValueInvalid() throws {
        let (f, s) = try loggedIn()
        let odd = Attribute(CKA_ALLOWED_MECHANISMS, [1, 2, 3])
        #expect(rv { _ = try aes(f, s, [odd]) } == CKR_ATTRIBUTE_VALUE_INVALID)
        let k = try aes(f, s, [])
        #expect(rv { try f.rt.setAttributeValue(session: s, object: k, template: [odd]) } == CKR_ATTRIBUTE_VALUE_INVALID)
        let gen = try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: gen, template: [.ulong(CKA_VALUE_LEN, 16), odd]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        // Keys only: a data object has no such attribute.
        #expect(rv { _ = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_DATA), .bool(CKA_PRIVATE, false), Attribute(CKA_VALUE, [1]), list(CKM_SHA256),
        ]) } == CKR_ATTRIBUTE_TYPE_INVALID)
    }

    @Test func digestKeyNeedsTheDigestInTheList() throws {
        let (f, s) = try loggedIn()
        let k = try aes(f, s, [list(CKM_SHA384)])
        let sha256 = try Mechanism(type: CKM_SHA256, parameter: nil)
        try f.rt.digestInit(session: s, mechanism: sha256)
        #expect(rv { try f.rt.digestKey(session: s, key: k) } == CKR_MECHANISM_INVALID)
        let sha384 = try Mechanism(type: CKM_SHA384, parameter: nil)
        try f.rt.digestInit(session: s, mechanism: sha384)
        try f.rt.digestKey(session: s, key: k)
    }

    /// The Inits check the list where they resolve the key (one lookup), in
    /// the spec's order: CKR_OPERATION_ACTIVE and CKR_KEY_HANDLE_INVALID
    /// first, then CKR_MECHANISM_INVALID for a mechanism outside the list,
    /// before the key's type and usage checks.
    @Test func initsCheckTheListWhereTheyResolveTheKey() throws {
        let (f, s) = try loggedIn()
        let session = try f.rt.session(s)
        let k = try aes(f, s, [list(CKM_AES_CBC_PAD), .bool(CKA_SIGN, true), .bool(CKA_DECRYPT, true)])
        let ecb = try Mechanism(type: CKM_AES_ECB, parameter: nil)
        let cbcPad = try [UInt8](repeating: 0, count: 16).withUnsafeBytes { try Mechanism(type: CKM_AES_CBC_PAD, parameter: $0) }
        #expect(rv { try f.rt.encryptInit(session: session, mechanism: ecb, key: k, allowing: CKM_AES_ECB) }
                == CKR_MECHANISM_INVALID)
        #expect(rv { try f.rt.decryptInit(session: session, mechanism: ecb, key: k, allowing: CKM_AES_ECB) }
                == CKR_MECHANISM_INVALID)
        #expect(rv { try f.rt.encryptInit(session: session, mechanism: ecb, key: 0x7fff_0000, allowing: CKM_AES_ECB) }
                == CKR_KEY_HANDLE_INVALID)
        // Outside the list comes before the key's type: HMAC on an AES key.
        let hmac = try Mechanism(type: CKM_SHA256_HMAC, parameter: nil)
        #expect(rv { try f.rt.signInit(session: session, mechanism: hmac, key: k, allowing: CKM_SHA256_HMAC) }
                == CKR_MECHANISM_INVALID)
        #expect(rv { try f.rt.verifyInit(session: session, mechanism: hmac, key: k, allowing: CKM_SHA256_HMAC) }
                == CKR_MECHANISM_INVALID)
        let rsa = try Mechanism(type: CKM_RSA_PKCS, parameter: nil)
        #expect(rv { try f.rt.signRecoverInit(session: session, mechanism: rsa, key: k, allowing: CKM_RSA_PKCS) }
                == CKR_MECHANISM_INVALID)
        #expect(rv { try f.rt.messageInit(session: session, encrypt: true, mechanism: .aesGCM, key: k,
                                          allowing: CKM_AES_GCM) } == CKR_MECHANISM_INVALID)
        // In the list: the Init goes on.
        try f.rt.encryptInit(session: session, mechanism: cbcPad, key: k, allowing: CKM_AES_CBC_PAD)
        // An active operation answers first, whatever the list.
        #expect(rv { try f.rt.encryptInit(session: session, mechanism: ecb, key: k, allowing: CKM_AES_ECB) }
                == CKR_OPERATION_ACTIVE)
    }

    @Test func generatedKeysKeepTheList() throws {
        let (f, s) = try loggedIn()
        let gen = try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil)
        let k = try f.rt.generateKey(session: s, mechanism: gen, template: [.ulong(CKA_VALUE_LEN, 16), list(CKM_AES_GCM)])
        #expect(try f.rt.getAttributeValue(session: s, object: k, types: [CKA_ALLOWED_MECHANISMS])[0]
                == .value(ulong(CKM_AES_GCM)))
    }
}
