import CPKCS11
import Keychain
import KeyshareCrypto

/// Where the object behind a handle lives.
enum ObjectEntry {
    /// A token object: the store item, found again by its persistent reference.
    case token(TokenID, PersistentReference, isPrivate: Bool)
    case session(SessionObject)
    /// A PKCS #11 3.2 trust object (TrustObjects.swift): derived, read-only, from the trusted
    /// certificate item `reference`; never stored.
    case trust(TokenID, PersistentReference)

    var tokenID: TokenID {
        switch self {
        case .token(let t, _, _): t
        case .session(let o): o.tokenID
        case .trust(let t, _): t
        }
    }

    var isPrivate: Bool {
        switch self {
        case .token(_, _, let p): p
        case .session(let o): o.isPrivate
        case .trust: false
        }
    }
}

/// A session object: lives in memory only and dies with its session.
final class SessionObject {
    let tokenID: TokenID
    let owner: CK_SESSION_HANDLE
    let objectClass: CK_OBJECT_CLASS
    let isPrivate: Bool
    /// CKA_UNIQUE_ID's bytes (ObjectTable.newSessionUniqueID).
    let uniqueID: [UInt8]
    /// Guarded by the runtime's lock, as `shown`.
    var attributes: AttributeMap { didSet { shown = nil } }
    /// The attributes as `Runtime.resolve` shows them, made once per change of
    /// `attributes` instead of per call: building it copies the attribute
    /// dictionary and adds four entries, which was the largest single cost
    /// of a C_EncryptInit on a session key (docs/benchmarks.md, "Symmetric
    /// encryption rows"). Cleared by every change of `attributes`
    /// (C_SetAttributeValue); the object itself goes with C_DestroyObject,
    /// its session and, for a private one, C_Logout. (Attributes only: a
    /// whole ObjectView would hold this object and never let it go.)
    var shown: AttributeMap?

    init(tokenID: TokenID, owner: CK_SESSION_HANDLE, objectClass: CK_OBJECT_CLASS, isPrivate: Bool,
         uniqueID: [UInt8], attributes: AttributeMap) {
        self.tokenID = tokenID
        self.owner = owner
        self.objectClass = objectClass
        self.isPrivate = isPrivate
        self.uniqueID = uniqueID
        self.attributes = attributes
    }
}

/// Handles <-> objects for this process. A token item keeps its handle for
/// as long as it stays loaded (found, created or copied), so repeated finds
/// give the same handle; handles are never reused for another object.
struct ObjectTable {
    private var next: CK_OBJECT_HANDLE = 1

    init(firstHandle: CK_OBJECT_HANDLE = 1) { next = max(1, firstHandle) }
    private(set) var entries: [CK_OBJECT_HANDLE: ObjectEntry] = [:]
    private var byReference: [PersistentReference: CK_OBJECT_HANDLE] = [:]
    /// Trust objects by their certificate's reference, so repeated finds give the same handle.
    private var byTrustReference: [PersistentReference: CK_OBJECT_HANDLE] = [:]
    /// The session objects' handles, so a find does not walk every token
    /// object handle this process holds (100,000 after listing a big token).
    private(set) var sessionHandles: Set<CK_OBJECT_HANDLE> = []
    /// Decrypted private keys by handle, so a second signature does not parse
    /// PKCS #8 again. Dropped at logout together with the handles.
    var keyCache: [CK_OBJECT_HANDLE: PrivateKey] = [:]
    /// Parsed public keys by handle (C_VerifyInit), likewise.
    var publicKeyCache: [CK_OBJECT_HANDLE: PublicKey] = [:]
    /// Token objects as last read from the store, with the store's change
    /// counter at that read and whether the user key was in force: while the
    /// counter has not moved (no process committed anything) the view is
    /// current, and C_SignInit/C_GetAttributeValue skip the read and the
    /// decryption of every attribute. Dropped with the handle, and for the
    /// whole token at logout (views read with the key hold opened values).
    var viewCache: [CK_OBJECT_HANDLE: CachedView] = [:]
    static let viewCacheLimit = 4096

    mutating func handle(token: TokenID, reference: PersistentReference, isPrivate: Bool) -> CK_OBJECT_HANDLE {
        if let h = byReference[reference] { return h }
        let h = allocate()
        entries[h] = .token(token, reference, isPrivate: isPrivate)
        byReference[reference] = h
        return h
    }

    /// The trust object of the trusted certificate `certificate`: one handle per certificate.
    mutating func trustHandle(token: TokenID, certificate: PersistentReference) -> CK_OBJECT_HANDLE {
        if let h = byTrustReference[certificate] { return h }
        let h = allocate()
        entries[h] = .trust(token, certificate)
        byTrustReference[certificate] = h
        return h
    }

    mutating func add(_ object: SessionObject) -> CK_OBJECT_HANDLE {
        let h = allocate()
        entries[h] = .session(object)
        sessionHandles.insert(h)
        return h
    }

    /// A new session object's CKA_UNIQUE_ID, "session-<next handle>-<entry count>", as the bytes
    /// the attribute holds: written digit by digit into one array (string interpolation cost
    /// ~1.5 K instructions and two allocations per new key: docs/benchmarks.md, "Module work per
    /// KEM call"). `mutating` only so that the runtime's observed `objects` is accessed in place
    /// rather than copied out (a retain and release of each of its tables).
    mutating func newSessionUniqueID() -> [UInt8] {
        let prefix = "session-".utf8
        return [UInt8](unsafeUninitializedCapacity: prefix.count + 2 * 20 + 1) { buf, n in
            n = 0
            for b in prefix { buf[n] = b; n += 1 }
            Self.appendDecimal(UInt64(next), to: buf, at: &n)
            buf[n] = UInt8(ascii: "-")
            n += 1
            Self.appendDecimal(UInt64(entries.count), to: buf, at: &n)
        }
    }

    private static func appendDecimal(_ v: UInt64, to buf: UnsafeMutableBufferPointer<UInt8>, at n: inout Int) {
        var digits = 1, rest = v
        while rest >= 10 { rest /= 10; digits += 1 }
        rest = v
        for i in stride(from: n + digits - 1, through: n, by: -1) {
            buf[i] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        n += digits
    }

    mutating func remove(_ h: CK_OBJECT_HANDLE) {
        switch entries.removeValue(forKey: h) {
        case .token(_, let ref, _)?: byReference[ref] = nil
        case .trust(_, let ref)?: byTrustReference[ref] = nil
        default: break
        }
        sessionHandles.remove(h)
        keyCache[h] = nil
        publicKeyCache[h] = nil
        viewCache[h] = nil
    }

    mutating func forget(token: TokenID) {
        for (h, e) in entries where e.tokenID == token { remove(h) }
        for (h, t) in loggedOut where t == token { loggedOut[h] = nil }
    }

    /// Handles of private objects dropped at logout, until the next login:
    /// a key function on one answers CKR_USER_NOT_LOGGED_IN (what the caller
    /// must do) instead of a bare invalid handle. After the next login they
    /// are plain invalid handles, as C_Logout's spec (§5.6) says they stay.
    private(set) var loggedOut: [CK_OBJECT_HANDLE: TokenID] = [:]

    mutating func forgetPrivate(token: TokenID) {
        for (h, e) in entries where e.tokenID == token && e.isPrivate {
            remove(h)
            loggedOut[h] = token
        }
        for (h, c) in viewCache where c.view.entry.tokenID == token { viewCache[h] = nil }
    }

    /// A login: the handles dropped at the last logout are simply invalid now.
    mutating func loggedIn(token: TokenID) {
        for (h, t) in loggedOut where t == token { loggedOut[h] = nil }
    }

    mutating func destroySessionObjects(of session: CK_SESSION_HANDLE) {
        for (h, e) in entries {
            if case .session(let o) = e, o.owner == session { remove(h) }
        }
    }

    mutating func removeAll() {
        entries.removeAll()
        loggedOut.removeAll()
        byReference.removeAll()
        byTrustReference.removeAll()
        sessionHandles.removeAll()
        keyCache.removeAll()
        publicKeyCache.removeAll()
        viewCache.removeAll()
    }

    private mutating func allocate() -> CK_OBJECT_HANDLE {
        let h = next
        next += 1
        return h
    }
}

struct CachedView {
    let counter: UInt64
    let keyed: Bool
    let view: ObjectView
}

/// An object as a chapter sees it: its class and every attribute, with the
/// storage attributes the store keeps outside the map filled in.
struct ObjectView {
    let handle: CK_OBJECT_HANDLE
    let entry: ObjectEntry
    let objectClass: CK_OBJECT_CLASS
    var attributes: AttributeMap

    var isToken: Bool {
        switch entry {
        case .token, .trust: true
        case .session: false
        }
    }
    var isPrivate: Bool { entry.isPrivate }
    var keyType: CK_KEY_TYPE? { attributes.ulong(CKA_KEY_TYPE) }
    func bool(_ t: CK_ATTRIBUTE_TYPE) -> Bool? { attributes.bool(t) }
}

extension Runtime {
    /// The object behind a handle as this session may see it: another token's
    /// objects, and private objects before user login, do not exist for it.
    func resolve(_ s: Session, _ h: CK_OBJECT_HANDLE) throws -> ObjectView {
        let (entry, key) = try lock.withLock { () throws -> (ObjectEntry, TokenKey?) in
            let key = logins[s.tokenID].flatMap { $0.role == .user ? $0.key : nil }
            guard let e = objects.entries[h], e.tokenID == s.tokenID else {
                // A private object's handle from before a logout (ObjectTable.loggedOut).
                if key == nil, objects.loggedOut[h] == s.tokenID { throw PKCS11Error.userNotLoggedIn }
                throw PKCS11Error.objectHandleInvalid
            }
            // Key functions report this as is; object functions as an invalid handle (resolveObject).
            if e.isPrivate, key == nil { throw PKCS11Error.userNotLoggedIn }
            return (e, key)
        }
        switch entry {
        case .token(_, let ref, _):
            // One PRAGMA instead of a read (and a decryption of every
            // attribute) when no process changed the store since the last read.
            let counter = try store.changeCounter()
            let keyed = key != nil
            if let c = lock.withLock({ objects.viewCache[h] }), c.counter == counter, c.keyed == keyed { return c.view }
            let item: Item
            do {
                // The user key also opens the sealed values of public
                // secret-bearing items (a CKA_PRIVATE=false secret key's value).
                item = try store.item(ref, key: key)
            } catch KeychainError.itemNotFound {
                lock.withLock { objects.remove(h) }
                throw PKCS11Error.objectHandleInvalid
            }
            var a = item.attributes
            a[CKA_CLASS] = AttributeCoding.ulong(item.itemClass.rawValue)
            a[CKA_TOKEN] = AttributeCoding.bool(true)
            a[CKA_PRIVATE] = AttributeCoding.bool(ObjectRules.isPrivate(item) || item.showsPrivate)
            a[CKA_UNIQUE_ID] = AttributeCoding.string(ref.base64url)
            let view = ObjectView(handle: h, entry: entry, objectClass: item.itemClass.rawValue, attributes: a)
            lock.withLock {
                // Not for a handle that went meanwhile (logout, destroy), nor
                // with a key that a logout meanwhile took away.
                guard objects.entries[h] != nil, keyed == (logins[s.tokenID].map { $0.role == .user } ?? false) else { return }
                if let old = objects.viewCache[h], old.view.attributes != a {
                    // Changed by someone: keys parsed from the old attributes go too.
                    objects.keyCache[h] = nil
                    objects.publicKeyCache[h] = nil
                }
                if objects.viewCache.count >= ObjectTable.viewCacheLimit { objects.viewCache.removeAll() }
                objects.viewCache[h] = CachedView(counter: counter, keyed: keyed, view: view)
            }
            return view
        case .trust(_, let ref):
            return try trustView(h, entry, certificate: ref, key: key)
        case .session(let o):
            let a = lock.withLock { () -> AttributeMap in
                if let a = o.shown { return a }
                var a = o.attributes
                a[CKA_CLASS] = AttributeCoding.ulong(o.objectClass)
                a[CKA_TOKEN] = AttributeCoding.bool(false)
                a[CKA_PRIVATE] = AttributeCoding.bool(o.isPrivate)
                a[CKA_UNIQUE_ID] = o.uniqueID
                o.shown = a
                return a
            }
            return ObjectView(handle: h, entry: entry, objectClass: o.objectClass, attributes: a)
        }
    }

    /// The decrypted private key of a key object, cached by handle.
    func privateKey(_ view: ObjectView) throws -> PrivateKey {
        if let k = lock.withLock({ objects.keyCache[view.handle] }) { return k }
        guard view.objectClass == CKO_PRIVATE_KEY else { throw PKCS11Error.keyTypeInconsistent }
        guard let der = view.attributes[CKA.keysharePKCS8] else { throw PKCS11Error.keyHandleInvalid }
        let k = try PrivateKey(der: der)
        // Not for a handle that went meanwhile (a logout must not leave a parsed key behind).
        lock.withLock { if objects.entries[view.handle] != nil { objects.keyCache[view.handle] = k } }
        return k
    }
}
