import CPKCS11
import Keychain
import KeyshareCrypto
import Tokens

/// The find operation: its matches are taken at C_FindObjectsInit, so later
/// changes do not disturb a running search.
final class FindOperation: Operation {
    var remaining: [CK_OBJECT_HANDLE]
    init(_ handles: [CK_OBJECT_HANDLE]) { remaining = handles }
}

extension Runtime {
    /// An object handle as the object functions see it: a private object
    /// without login is CKR_OBJECT_HANDLE_INVALID (their return values do not
    /// include CKR_USER_NOT_LOGGED_IN; the key functions report that one).
    func resolveObject(_ s: Session, _ h: CK_OBJECT_HANDLE) throws -> ObjectView {
        do {
            return try resolve(s, h)
        } catch let e as PKCS11Error where e == .userNotLoggedIn {
            throw PKCS11Error.objectHandleInvalid
        }
    }

    public func getAttributeValue(session h: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE,
                                  types: [CK_ATTRIBUTE_TYPE]) throws -> [AttributeLookup] {
        let view = try resolveObject(try session(h), object)
        return types.map { ObjectRules.lookup(view, $0) }
    }

    /// The size is the sum of the visible attribute encodings: enough for a
    /// caller sizing a copy, and no hint about secret parts.
    public func objectSize(session h: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE) throws -> CK_ULONG {
        let view = try resolveObject(try session(h), object)
        var size = 0
        for (t, v) in view.attributes where !ObjectRules.hidden.contains(t) && !ObjectRules.isSensitive(view, t) {
            size += v.count
        }
        return CK_ULONG(size)
    }

    /// ObjectRules.checkInheritedPrivacy for a key made from the keys `sources` (C_DeriveKey,
    /// C_UnwrapKey, C_DecapsulateKey), with the template as the caller gave it and, when
    /// `stored` names one, the source's own CKA_UNWRAP_TEMPLATE / CKA_DECAPSULATE_TEMPLATE that
    /// will be merged into it. A handle that does not resolve is left to the function, which
    /// answers for it in its own order.
    func checkInheritedPrivacy(_ s: Session, sources: [CK_OBJECT_HANDLE], templates: [Template],
                               stored: CK_ATTRIBUTE_TYPE? = nil) throws {
        let views = sources.compactMap { try? resolveKey(s, $0) }
        guard views.contains(where: { $0.isPrivate }) else { return }
        for t in templates { try ObjectRules.checkInheritedPrivacy(views, try t.map()) }
        if let stored {
            for v in views { try ObjectRules.checkInheritedPrivacy(views, try TemplateAttributes.stored(v, stored).map()) }
        }
    }

    /// Token objects need a R/W session, private ones a logged-in user.
    func checkWritable(_ s: Session, isToken: Bool, isPrivate: Bool) throws {
        if isToken, !s.readWrite { throw PKCS11Error.sessionReadOnly }
        if isPrivate, userKey(for: s.tokenID) == nil { throw PKCS11Error.userNotLoggedIn }
    }

    public func setAttributeValue(session h: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE, template: Template) throws {
        let s = try session(h)
        let view = try resolveObject(s, object)
        try ObjectRules.checkPrivacyChange(view, try template.map())
        try checkWritable(s, isToken: view.isToken, isPrivate: view.isPrivate)
        guard view.bool(CKA_MODIFIABLE) ?? true else { throw PKCS11Error.actionProhibited }
        let so = login(for: s.tokenID)?.role == .securityOfficer
        for a in template { try ObjectRules.checkSet(view, a, soLoggedIn: so) }
        let changes = try template.map()
        switch view.entry {
        case .token(_, let ref, _):
            try store.update(ref, attributes: changes, key: userKey(for: s.tokenID))
        case .session(let o):
            lock.withLock {
                o.attributes.merge(changes) { _, new in new }
                objectGeneration &+= 1  // a class instance: `objects` did not change (ResolvedKeyMemo.swift)
            }
        case .trust:
            throw PKCS11Error.actionProhibited  // CKA_MODIFIABLE false already refused it
        }
        // A changed key (CKA_ENCRYPT false, say): no session keeps its memo or keyed contexts.
        lock.withLock { dropKeyedStateLocked(token: s.tokenID) }
    }

    public func createObject(session h: CK_SESSION_HANDLE, template: Template) throws -> CK_OBJECT_HANDLE {
        let s = try session(h)
        let t = try template.map()
        // A certificate without CKA_ID joins the key pair its public key matches (Tokens.KeyPairing).
        let so = login(for: s.tokenID)?.role == .securityOfficer
        let attrs = try KeyPairing.certificateJoiningKeyPair(try ObjectFactory.build(t, soLoggedIn: so), template: t, token: s.tokenID,
                                                              store: store, key: userKey(for: s.tokenID))
        return try store(attrs, in: s)
    }

    /// Stores a complete attribute set as a token or session object.
    /// `copiedTrust`: a C_CopyObject of a key the SO already trusted (the
    /// copy's template went through ObjectRules.checkSet).
    /// `attrs` is consumed: the callers' maps are theirs to give, so the changes below are made in
    /// place, not on a copy of the whole map.
    func store(_ attrs: consuming AttributeMap, in s: Session, copiedTrust: Bool = false) throws -> CK_OBJECT_HANDLE {
        guard let cls = try attrs.checkedULong(CKA_CLASS) else { throw PKCS11Error.templateIncomplete }
        // Every creating path ends here, so the CKA_PRIVATE rule holds for all
        // of them (the callers also check it before doing any work).
        try ObjectRules.checkPrivacy(cls, attrs)
        let isToken = try attrs.checkedBool(CKA_TOKEN) ?? false
        let isPrivate = try attrs.checkedBool(CKA_PRIVATE) ?? ObjectFactory.privateByDefault(cls)
        try checkWritable(s, isToken: isToken, isPrivate: isPrivate)
        // CKA_TRUSTED "can only be set to CK_TRUE by the SO user" (PKCS #11
        // 3.0 §4.6.3, §4.8 footnote 11), at creation as in C_SetAttributeValue
        // (ObjectRules.checkSet): the wrap rules let a trusted key wrap any
        // sensitive key, so a user-made trusted key of known value (or an RSA
        // public key whose private half the user holds) would export them all.
        if try attrs.checkedBool(CKA_TRUSTED) == true, !copiedTrust, login(for: s.tokenID)?.role != .securityOfficer {
            throw PKCS11Error.attributeReadOnly
        }
        var a = attrs
        // Computed, or checked against the caller's, or left empty as asked (CheckValue.swift).
        try CheckValue.settle(&a)
        a[CKA_PRIVATE] = AttributeCoding.bool(isPrivate)
        a[CKA_UNIQUE_ID] = nil
        if isToken {
            guard let itemClass = ItemClass(rawValue: cls) else { throw PKCS11Error.attributeValueInvalid }
            a[CKA_TOKEN] = AttributeCoding.bool(true)
            // Secret and private keys seal their values even when CKA_PRIVATE is false.
            let sealsValues = itemClass == .secretKey || itemClass == .privateKey
            let ref = try store.add(token: s.tokenID, itemClass: itemClass, attributes: a,
                                    key: isPrivate || sealsValues ? userKey(for: s.tokenID) : nil)
            return lock.withLock { objects.handle(token: s.tokenID, reference: ref, isPrivate: isPrivate) }
        }
        a[CKA_TOKEN] = nil
        a[CKA_CLASS] = nil
        return lock.withLock {
            // A new handle changes no view a session has memoized (handles are never reused), so
            // `objectGeneration` stays: otherwise every C_EncapsulateKey / C_DecapsulateKey /
            // C_DeriveKey, which makes an object, would make the next call resolve its key again
            // (ResolvedKeyMemo.swift).
            let generation = objectGeneration
            let o = SessionObject(tokenID: s.tokenID, owner: s.handle, objectClass: cls, isPrivate: isPrivate,
                                  uniqueID: objects.newSessionUniqueID(), attributes: a)
            let h = objects.add(o)
            objectGeneration = generation
            return h
        }
    }

    public func copyObject(session h: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE, template: Template) throws -> CK_OBJECT_HANDLE {
        let s = try session(h)
        let view = try resolveObject(s, object)
        let changes = try template.map()
        // A copy may change CKA_PRIVATE, but a private key never becomes public, and a token copy of
        // a key is private (ObjectRules.alwaysPrivate); a public session key may stay public in a
        // session copy (issue 29).
        try ObjectRules.checkPrivacyChange(view, changes)
        let copyIsToken = try changes.checkedBool(CKA_TOKEN) ?? view.isToken
        try ObjectRules.checkPrivacy(view.objectClass, changes, isToken: copyIsToken)
        guard view.bool(CKA_COPYABLE) ?? true else { throw PKCS11Error.actionProhibited }
        // A card's key lives on the card: a token copy of its proxy would be a
        // private item of a token with no token key to seal it (session copies,
        // as pkcs11-provider makes, are fine).
        if view.isExternalKey, try changes.checkedBool(CKA_TOKEN) ?? view.isToken { throw PKCS11Error.actionProhibited }
        let so = login(for: s.tokenID)?.role == .securityOfficer
        var a = view.attributes
        a[CKA_UNIQUE_ID] = nil
        for t in template {
            // CKA_TOKEN and CKA_PRIVATE may change in a copy; the rest follows C_SetAttributeValue's rules.
            if t.type != CKA_TOKEN, t.type != CKA_PRIVATE { try ObjectRules.checkSet(view, t, soLoggedIn: so) }
        }
        a.merge(changes) { _, new in new }
        // A private key's copy is private (a key a store from before the rule holds as public
        // included), and so is a token copy of a public session key unless it said otherwise above.
        if ObjectRules.alwaysPrivate(view.objectClass), view.isPrivate || copyIsToken {
            a[CKA_PRIVATE] = AttributeCoding.bool(true)
        }
        return try store(a, in: s, copiedTrust: view.bool(CKA_TRUSTED) == true)
    }

    public func destroyObject(session h: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE) throws {
        let s = try session(h)
        let view = try resolveObject(s, object)
        try checkWritable(s, isToken: view.isToken, isPrivate: view.isPrivate)
        guard view.bool(CKA_DESTROYABLE) ?? true else { throw PKCS11Error.actionProhibited }
        if case .token(_, let ref, _) = view.entry { try store.delete(ref) }
        lock.withLock {
            objects.remove(object)
            // Its key bytes and key schedules go from every session now (ResolvedKeyMemo.swift).
            dropKeyedStateLocked(token: s.tokenID)
        }
    }

    /// Matching uses the store's indexes (class, token, exact attributes), not
    /// a scan; private items come back only with the user's key.
    public func findObjectsInit(session h: CK_SESSION_HANDLE, template: Template) throws {
        let s = try session(h)
        guard !s.isActive(.find) else { throw PKCS11Error.operationActive }
        var want = try template.map()
        let key = userKey(for: s.tokenID)
        let tokenFilter = try want.checkedBool(CKA_TOKEN)
        let classFilter = try want.checkedULong(CKA_CLASS)
        let privateFilter = try want.checkedBool(CKA_PRIVATE)
        // An embedded template (CKA_WRAP_TEMPLATE ...) matches no object, as
        // in SoftHSM2, whose search compares no attribute-map value
        // (PKCS #11 3.0 §5.7.7 lets a token do either).
        if privateFilter == true && key == nil || want.keys.contains(where: TemplateAttributes.isTemplateType) {
            try s.begin(.find, FindOperation([]))
            return
        }
        var handles: [CK_OBJECT_HANDLE] = []
        let uniqueID = want.removeValue(forKey: CKA_UNIQUE_ID)

        if tokenFilter != false, classFilter.map({ ItemClass(rawValue: $0) != nil }) ?? true {
            var q = ItemQuery(tokenID: s.tokenID, itemClass: classFilter.flatMap { ItemClass(rawValue: $0) })
            var storeAttrs = want
            for t in [CKA_CLASS, CKA_TOKEN, CKA_PRIVATE] { storeAttrs[t] = nil }
            // A template value that is some class's default may be answered
            // from the defaults (not stored): matched after the query.
            let byDefault = Self.defaultValued(storeAttrs)
            for t in byDefault.keys { storeAttrs[t] = nil }
            q.attributes = storeAttrs
            if let uniqueID {
                guard let ref = PersistentReference(base64url: String(decoding: uniqueID, as: UTF8.self)) else {
                    try s.begin(.find, FindOperation([]))
                    return
                }
                q.reference = ref
            }
            let items = try store.find(q, key: key)
            // Keys count as private even where an old store holds them as public
            // (ObjectRules.isPrivate); card proxies show as private (showsPrivate),
            // their login being the card's (externalVisible). A chain
            // certificate kept apart (Item.isChainOnly) is no object here.
            let matched = items.filter {
                guard !$0.isChainOnly else { return false }
                let isPrivate = ObjectRules.isPrivate($0) || $0.showsPrivate
                let external = $0.attributes[CKA.keyshareExternal] != nil
                return (privateFilter == nil || isPrivate == privateFilter) && (key != nil || !isPrivate || external)
                    && externalVisible($0, s) && Self.matches($0, byDefault)
            }
            handles += lock.withLock {
                matched.map { objects.handle(token: $0.tokenID, reference: $0.reference, isPrivate: ObjectRules.isPrivate($0) || $0.showsPrivate) }
            }
        }
        if tokenFilter != true {
            let candidates = lock.withLock { () -> [(CK_OBJECT_HANDLE, SessionObject)] in
                objects.sessionHandles.compactMap { h in
                    if case .session(let o)? = objects.entries[h], o.tokenID == s.tokenID { return (h, o) }
                    return nil
                }
            }
            for (oh, _) in candidates.sorted(by: { $0.0 < $1.0 }) {
                guard let view = try? resolveObject(s, oh) else { continue }
                var full = view.attributes
                for (t, v) in ObjectRules.defaults(for: view.objectClass) where full[t] == nil { full[t] = v }
                let ok = template.allSatisfy { t in
                    !ObjectRules.isSensitive(view, t.type) && full[t.type] == t.value
                }
                if ok { handles.append(oh) }
            }
        }
        if classFilter == CKO_TRUST_32, tokenFilter != false, privateFilter != true {
            handles += try trustObjects(s, matching: template)
        }
        try s.begin(.find, FindOperation(handles))
    }

    public func findObjects(session h: CK_SESSION_HANDLE, max: Int) throws -> [CK_OBJECT_HANDLE] {
        try session(h).step(.find, as: FindOperation.self) { op, keep in
            keep = true
            let n = Swift.min(max, op.remaining.count)
            let out = Array(op.remaining.prefix(n))
            op.remaining.removeFirst(n)
            return out
        }
    }

    public func findObjectsFinal(session h: CK_SESSION_HANDLE) throws {
        let s = try session(h)
        guard s.isActive(.find) else { throw PKCS11Error.operationNotInitialized }
        s.end(.find)
    }
}
