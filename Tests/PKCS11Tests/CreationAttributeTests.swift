import CPKCS11
@testable import PKCS11
import Testing

/// The attributes a template may not set when an object is made, from the
/// PKCS #11 3.0 attribute tables' common footnotes: "2 Must not be specified
/// when object is created with C_CreateObject" (CKA_LOCAL, CKA_KEY_GEN_MECHANISM,
/// CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE, CKA_UNIQUE_ID) and "10 Can
/// only be set to CK_TRUE by the SO user" (CKA_TRUSTED). An attribute "which
/// may not be set by the application" is CKR_ATTRIBUTE_READ_ONLY (§5.1.5,
/// return values). Found by the third-party run (docs/pkcs11-conformance.md,
/// "Third-party suites"): C_CreateObject stored whatever the caller claimed,
/// so a user could plant a key whose value they know as CKA_TRUSTED and wrap
/// sensitive keys under it (the wrap rule 2 of "Wrap/decrypt separation").
struct CreationAttributeTests {
    static let aesValue = [UInt8](repeating: 0x4B, count: 16)

    func aes(_ extra: [Attribute]) -> Template {
        [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, Self.aesValue)] + extra
    }

    func gen(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ extra: [Attribute]) throws -> CK_OBJECT_HANDLE {
        try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                             template: [.ulong(CKA_VALUE_LEN, 16)] + extra)
    }

    @Test func aUserCannotCreateATrustedKeyAndWrapUnderIt() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(rv { _ = try f.rt.createObject(session: s, template: aes([
            .bool(CKA_TRUSTED, true), .bool(CKA_WRAP, true), .bool(CKA_DECRYPT, false),
        ])) } == CKR_ATTRIBUTE_READ_ONLY)
        // The attack the rule stops, end to end: had the planted key been
        // made, a sensitive key would leave the token under a known value.
        let victim = try gen(f, s, [.bool(CKA_SENSITIVE, true), .bool(CKA_EXTRACTABLE, true)])
        let planted = try? f.rt.createObject(session: s, template: aes([
            .bool(CKA_TRUSTED, true), .bool(CKA_WRAP, true), .bool(CKA_DECRYPT, false),
        ]))
        if let planted {
            let wrap = try Mechanism(type: CKM_AES_KEY_WRAP, parameter: nil)
            #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: wrap, wrappingKey: planted, key: victim, capacity: 64) }
                    == CKR_KEY_NOT_WRAPPABLE)
        }
        // CKA_TRUSTED=false is what every object has anyway: accepted.
        let h = try f.rt.createObject(session: s, template: aes([.bool(CKA_TRUSTED, false)]))
        #expect(try f.rt.getAttributeValue(session: s, object: h, types: [CKA_TRUSTED]) == [.value(bool(false))])
    }

    @Test func generatedAndDerivedTemplatesCannotAskForTrusted() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(rv { _ = try gen(f, s, [.bool(CKA_TRUSTED, true)]) } == CKR_ATTRIBUTE_READ_ONLY)
        #expect(rv {
            _ = try f.rt.generateKeyPair(session: s, mechanism: try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil),
                                         publicTemplate: [Attribute(CKA_EC_PARAMS, [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]),
                                                          .bool(CKA_TRUSTED, true)],
                                         privateTemplate: [.bool(CKA_SIGN, true)])
        } == CKR_ATTRIBUTE_READ_ONLY)
        _ = try gen(f, s, [.bool(CKA_TRUSTED, false)])
    }

    @Test func theSOStillMarksPublicObjectsTrustedAtCreation() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let data: Template = [.ulong(CKA_CLASS, CKO_DATA), .bool(CKA_TOKEN, false), .bool(CKA_PRIVATE, false)]
        let rsaPublic: Template = [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, CKK_RSA), .bool(CKA_TOKEN, false),
            Attribute(CKA_MODULUS, [0xC1] + [UInt8](repeating: 0x33, count: 255)), Attribute(CKA_PUBLIC_EXPONENT, [1, 0, 1]),
            .bool(CKA_TRUSTED, true), .bool(CKA_WRAP, true),
        ]
        // Public session, nobody logged in: an application, not the SO.
        #expect(rv { _ = try f.rt.createObject(session: s, template: rsaPublic) } == CKR_ATTRIBUTE_READ_ONLY)
        _ = try f.rt.createObject(session: s, template: data)
        try f.rt.login(session: s, userType: CKU_SO, pin: soPIN)
        let h = try f.rt.createObject(session: s, template: rsaPublic)
        #expect(try f.rt.getAttributeValue(session: s, object: h, types: [CKA_TRUSTED]) == [.value(bool(true))])
    }

    @Test func createObjectRefusesWhatOnlyTheTokenSays() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        for a: Attribute in [.bool(CKA_LOCAL, true), .bool(CKA_ALWAYS_SENSITIVE, true), .bool(CKA_NEVER_EXTRACTABLE, true),
                             .ulong(CKA_KEY_GEN_MECHANISM, CKM_AES_KEY_GEN), Attribute(CKA_UNIQUE_ID, Array("spoof".utf8)),
                             .bool(CKA_LOCAL, false)] {
            #expect(rv { _ = try f.rt.createObject(session: s, template: aes([a])) } == CKR_ATTRIBUTE_READ_ONLY,
                    "attribute 0x\(String(a.type, radix: 16))")
        }
        #expect(rv { _ = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_DATA), .bool(CKA_TOKEN, false), Attribute(CKA_UNIQUE_ID, Array("spoof".utf8)),
        ]) } == CKR_ATTRIBUTE_READ_ONLY)
        // Without them the key is made, and says what is true of it.
        let h = try f.rt.createObject(session: s, template: aes([]))
        #expect(try f.rt.getAttributeValue(session: s, object: h, types: [CKA_LOCAL, CKA_ALWAYS_SENSITIVE])
                == [.value(bool(false)), .value(bool(false))])
    }
}
