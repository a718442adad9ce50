import CPKCS11
import Keychain
@testable import PKCS11
import Testing

/// The per-process caches (object views, parsed keys) never serve stale data:
/// another process's change is seen on the next call, and logout drops keys.
struct CacheTests {
    func data(_ label: String) -> Template {
        [.ulong(CKA_CLASS, CKO_DATA), .bool(CKA_TOKEN, true), .bool(CKA_PRIVATE, false),
         Attribute(CKA_LABEL, Array(label.utf8)), Attribute(CKA_VALUE, [1, 2, 3])]
    }

    @Test func anotherProcessesChangeIsSeenOnTheNextCall() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let h = try f.rt.createObject(session: s, template: data("before"))
        #expect(try f.rt.getAttributeValue(session: s, object: h, types: [CKA_LABEL]) == [.value(Array("before".utf8))])
        // Twice: the second answer comes from the cache.
        #expect(try f.rt.getAttributeValue(session: s, object: h, types: [CKA_LABEL]) == [.value(Array("before".utf8))])

        // A second runtime on the same store stands for another process (its own SQLite connection).
        let other = try Runtime(home: f.home)
        defer { other.shutdown() }
        let o = try other.openSession(slot: slot, flags: CKF_SERIAL_SESSION | CKF_RW_SESSION)
        try other.findObjectsInit(session: o, template: [Attribute(CKA_LABEL, Array("before".utf8))])
        let found = try other.findObjects(session: o, max: 10)
        try other.findObjectsFinal(session: o)
        #expect(found.count == 1)
        try other.setAttributeValue(session: o, object: found[0], template: [Attribute(CKA_LABEL, Array("after".utf8))])
        #expect(try f.rt.getAttributeValue(session: s, object: h, types: [CKA_LABEL]) == [.value(Array("after".utf8))])

        try other.destroyObject(session: o, object: found[0])
        #expect(rv { _ = try f.rt.getAttributeValue(session: s, object: h, types: [CKA_LABEL]) } == CKR_OBJECT_HANDLE_INVALID)
    }

    @Test func logoutDropsCachedKeysAndPrivateViews() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let priv = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_DATA), .bool(CKA_TOKEN, true), .bool(CKA_PRIVATE, true),
            Attribute(CKA_LABEL, Array("secret".utf8)), Attribute(CKA_VALUE, [9])])
        _ = try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_VALUE])
        #expect(f.rt.lock.withLock { f.rt.objects.viewCache[priv] != nil })
        try f.rt.logout(session: s)
        #expect(f.rt.lock.withLock { f.rt.objects.viewCache.isEmpty && f.rt.objects.keyCache.isEmpty })
        #expect(rv { _ = try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_VALUE]) } == CKR_OBJECT_HANDLE_INVALID)
    }

    @Test func valuesOpenedWithTheKeyAreNotServedAfterLogout() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let secret = [UInt8](repeating: 7, count: 32)
        let template: Template = [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), .bool(CKA_TOKEN, true),
            .bool(CKA_PRIVATE, false), .bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true),
            Attribute(CKA_VALUE, secret)]
        // The module no longer makes public secret keys (ObjectRules.alwaysPrivate);
        // an older store may hold one, made here through the store itself.
        #expect(rv { _ = try f.rt.createObject(session: s, template: template) } == CKR_TEMPLATE_INCONSISTENT)
        guard let token = try f.rt.store.tokens().first?.tokenID else { Issue.record("no token"); return }
        var a = try template.map()
        a[CKA_CLASS] = nil
        _ = try f.rt.store.add(token: token, itemClass: .secretKey, attributes: a, key: f.rt.userKey(for: token))
        try f.rt.findObjectsInit(session: s, template: [.ulong(CKA_CLASS, CKO_SECRET_KEY)])
        guard let h = try f.rt.findObjects(session: s, max: 1).first else { Issue.record("not found"); return }
        try f.rt.findObjectsFinal(session: s)
        #expect(try f.rt.getAttributeValue(session: s, object: h, types: [CKA_VALUE]) == [.value(secret)])
        try f.rt.logout(session: s)
        let after = try? f.rt.getAttributeValue(session: s, object: h, types: [CKA_VALUE])
        #expect(after != [.value(secret)])
    }

    /// Session objects keep the attribute map `resolve` shows (SessionObject.shown,
    /// made once per change): C_SetAttributeValue must drop it, and a
    /// C_EncryptInit after the change must see the change.
    @Test func aSessionObjectsShownAttributesFollowEveryChange() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let key = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, [UInt8](repeating: 7, count: 16)),
            .bool(CKA_ENCRYPT, true), Attribute(CKA_LABEL, Array("one".utf8))])
        let iv = [UInt8](repeating: 0, count: 16)
        for label in ["two", "three"] {
            try f.rt.encryptInit(session: s, mechanism: .aesCBC(iv: iv, pad: true), key: key)
            _ = try f.rt.encrypt(session: s, data: [1, 2, 3], capacity: 64)
            try f.rt.setAttributeValue(session: s, object: key, template: [Attribute(CKA_LABEL, Array(label.utf8))])
            #expect(try f.rt.getAttributeValue(session: s, object: key, types: [CKA_LABEL, CKA_TOKEN, CKA_CLASS])
                    == [.value(Array(label.utf8)), .value(bool(false)), .value(ulong(CKO_SECRET_KEY))])
        }
        // CKA_ENCRYPT can only be lowered to what it is (fixed secret-key usage); a
        // readable session key's CKA_SENSITIVE goes false -> true and is seen at once.
        let readable = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES), Attribute(CKA_VALUE, [UInt8](repeating: 8, count: 16)),
            .bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        #expect(try f.rt.getAttributeValue(session: s, object: readable, types: [CKA_VALUE]) == [.value([UInt8](repeating: 8, count: 16))])
        try f.rt.setAttributeValue(session: s, object: readable, template: [.bool(CKA_SENSITIVE, true)])
        #expect(try f.rt.getAttributeValue(session: s, object: readable, types: [CKA_VALUE]) == [.sensitive])
    }
}
