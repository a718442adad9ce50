import CPKCS11
import Keychain
@testable import PKCS11
import Testing

struct ObjectTests {
    func dataTemplate(token: Bool, isPrivate: Bool = false, label: String = "d") -> Template {
        [.ulong(CKA_CLASS, CKO_DATA), .bool(CKA_TOKEN, token), .bool(CKA_PRIVATE, isPrivate),
         Attribute(CKA_LABEL, Array(label.utf8)), Attribute(CKA_VALUE, [1, 2, 3])]
    }

    func aesTemplate(token: Bool) -> Template {
        [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_TOKEN, token),
         Attribute(CKA_VALUE, [UInt8](repeating: 7, count: 32)), Attribute(CKA_LABEL, Array("aes".utf8)),
         .bool(CKA_ENCRYPT, true)]
    }

    @Test func createRules() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let ro = try f.ro(slot)
        #expect(rv { _ = try f.rt.createObject(session: ro, template: dataTemplate(token: true)) } == CKR_SESSION_READ_ONLY)
        #expect(rv { _ = try f.rt.createObject(session: ro, template: dataTemplate(token: false, isPrivate: true)) } == CKR_USER_NOT_LOGGED_IN)
        #expect(rv { _ = try f.rt.createObject(session: ro, template: [Attribute(CKA_LABEL, [])]) } == CKR_TEMPLATE_INCOMPLETE)
        #expect(rv { _ = try f.rt.createObject(session: ro, template: [.ulong(CKA_CLASS, CKO_DATA), Attribute(CKA_TOKEN, [1, 1])]) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try f.rt.createObject(session: ro, template: [.ulong(CKA_CLASS, CKO_DATA), .ulong(CKA_CLASS, CKO_CERTIFICATE)]) }
                == CKR_TEMPLATE_INCONSISTENT)
        let h = try f.rt.createObject(session: ro, template: dataTemplate(token: false))
        let got = try f.rt.getAttributeValue(session: ro, object: h, types: [CKA_VALUE, CKA_TOKEN, CKA_MODULUS, CKA_MODIFIABLE])
        #expect(got == [.value([1, 2, 3]), .value([0]), .typeInvalid, .value([1])])
    }

    @Test func sensitiveAndHiddenAttributes() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let key = try f.rt.createObject(session: s, template: aesTemplate(token: true))
        let got = try f.rt.getAttributeValue(session: s, object: key,
                                             types: [CKA_VALUE, CKA_VALUE_LEN, CKA_SENSITIVE, CKA.keysharePKCS8, CKA_UNIQUE_ID])
        #expect(got[0] == .sensitive)
        #expect(got[1] == .value(ulong(32)))
        #expect(got[2] == .value(bool(true)))
        #expect(got[3] == .typeInvalid)
        guard case .value(let uid) = got[4] else { Issue.record("no unique ID"); return }
        #expect(PersistentReference(base64url: String(decoding: uid, as: UTF8.self)) != nil)
    }

    @Test func setAttributeRules() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let key = try f.rt.createObject(session: s, template: aesTemplate(token: true))
        func set(_ a: Attribute) -> CK_RV { rv { try f.rt.setAttributeValue(session: s, object: key, template: [a]) } }
        #expect(set(.bool(CKA_SENSITIVE, false)) == CKR_ATTRIBUTE_READ_ONLY)
        #expect(set(.bool(CKA_EXTRACTABLE, true)) == CKR_ATTRIBUTE_READ_ONLY)
        #expect(set(.ulong(CKA_CLASS, CKO_DATA)) == CKR_ATTRIBUTE_READ_ONLY)
        #expect(set(Attribute(CKA_VALUE, [0])) == CKR_ATTRIBUTE_READ_ONLY)
        #expect(set(Attribute(CKA.keysharePKCS8, [0])) == CKR_ATTRIBUTE_TYPE_INVALID)
        #expect(set(Attribute(CKA_LABEL, Array("renamed".utf8))) == CKR_OK)
        #expect(try f.rt.getAttributeValue(session: s, object: key, types: [CKA_LABEL]) == [.value(Array("renamed".utf8))])

        // One-way switches in the allowed direction.
        let open = try f.rt.createObject(session: s, template: aesTemplate(token: false) + [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        #expect(try f.rt.getAttributeValue(session: s, object: open, types: [CKA_VALUE]) == [.value([UInt8](repeating: 7, count: 32))])
        try f.rt.setAttributeValue(session: s, object: open, template: [.bool(CKA_SENSITIVE, true), .bool(CKA_EXTRACTABLE, false)])
        #expect(try f.rt.getAttributeValue(session: s, object: open, types: [CKA_VALUE]) == [.sensitive])

        let locked = try f.rt.createObject(session: s, template: dataTemplate(token: false) + [.bool(CKA_MODIFIABLE, false)])
        #expect(rv { try f.rt.setAttributeValue(session: s, object: locked, template: [Attribute(CKA_LABEL, [])]) } == CKR_ACTION_PROHIBITED)
    }

    @Test func findHidesPrivateObjectsUntilLogin() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let pub = try f.rt.createObject(session: s, template: dataTemplate(token: true, label: "public"))
        let priv = try f.rt.createObject(session: s, template: dataTemplate(token: true, isPrivate: true, label: "secret"))
        let sess = try f.rt.createObject(session: s, template: dataTemplate(token: false, label: "mem"))

        func find(_ t: Template) throws -> [CK_OBJECT_HANDLE] {
            try f.rt.findObjectsInit(session: s, template: t)
            var all: [CK_OBJECT_HANDLE] = []
            while true {
                let batch = try f.rt.findObjects(session: s, max: 1)
                if batch.isEmpty { break }
                all += batch
            }
            try f.rt.findObjectsFinal(session: s)
            return all
        }
        #expect(Set(try find([])) == [pub, priv, sess])
        #expect(try find([Attribute(CKA_LABEL, Array("secret".utf8))]) == [priv])
        #expect(try find([.bool(CKA_TOKEN, false)]) == [sess])
        #expect(try find([.bool(CKA_TOKEN, true), Attribute(CKA_LABEL, Array("mem".utf8))]) == [])
        // Finding again gives the same handles.
        #expect(try find([Attribute(CKA_LABEL, Array("public".utf8))]) == [pub])

        guard case .value(let uid) = try f.rt.getAttributeValue(session: s, object: pub, types: [CKA_UNIQUE_ID])[0] else {
            Issue.record("no unique ID"); return
        }
        #expect(try find([Attribute(CKA_UNIQUE_ID, uid)]) == [pub])

        try f.rt.logout(session: s)
        #expect(try find([]) == [pub, sess].sorted())
        #expect(rv { _ = try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_LABEL]) } == CKR_OBJECT_HANDLE_INVALID)
        #expect(try find([.bool(CKA_PRIVATE, true)]) == [])
    }

    @Test func findOperationState() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.ro(slot)
        #expect(rv { _ = try f.rt.findObjects(session: s, max: 1) } == CKR_OPERATION_NOT_INITIALIZED)
        #expect(rv { try f.rt.findObjectsFinal(session: s) } == CKR_OPERATION_NOT_INITIALIZED)
        try f.rt.findObjectsInit(session: s, template: [])
        #expect(rv { try f.rt.findObjectsInit(session: s, template: []) } == CKR_OPERATION_ACTIVE)
        try f.rt.findObjectsFinal(session: s)
    }

    @Test func destroyCopyAndSessionObjectLifetime() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let token = try f.rt.createObject(session: s, template: dataTemplate(token: true))
        let copy = try f.rt.copyObject(session: s, object: token, template: [.bool(CKA_TOKEN, false), Attribute(CKA_LABEL, Array("c".utf8))])
        #expect(try f.rt.getAttributeValue(session: s, object: copy, types: [CKA_TOKEN, CKA_LABEL, CKA_VALUE])
                == [.value([0]), .value(Array("c".utf8)), .value([1, 2, 3])])
        try f.rt.destroyObject(session: s, object: token)
        #expect(rv { _ = try f.rt.getAttributeValue(session: s, object: token, types: [CKA_LABEL]) } == CKR_OBJECT_HANDLE_INVALID)
        try f.rt.closeSession(s)
        let t = try f.rw(slot)
        #expect(rv { _ = try f.rt.getAttributeValue(session: t, object: copy, types: [CKA_LABEL]) } == CKR_OBJECT_HANDLE_INVALID)
    }

    @Test func attributeFillPrecedenceAndLengths() {
        let lookups: [AttributeLookup] = [.value([1, 2]), .value([1, 2, 3]), .typeInvalid, .value([9])]
        let (entries, r) = AttributeFill.evaluate(lookups, capacities: [nil, 2, 8, 1])
        #expect(entries == [.length(2), .unavailable, .unavailable, .copy([9])])
        #expect(r == CKR_ATTRIBUTE_TYPE_INVALID)
        #expect(AttributeFill.evaluate([.value([1, 2, 3])], capacities: [2]).rv == CKR_BUFFER_TOO_SMALL)
        #expect(AttributeFill.evaluate([.sensitive, .typeInvalid], capacities: [nil, nil]).rv == CKR_ATTRIBUTE_SENSITIVE)
        #expect(AttributeFill.evaluate([.value([])], capacities: [0]) == ([.copy([])], CKR_OK))
    }
}
