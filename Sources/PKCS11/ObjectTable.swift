import CPKCS11
import Keychain
import KeyshareCrypto

/// Where the object behind a handle lives.
enum ObjectEntry {
    /// A token object: the store item, found again by its persistent reference.
    case token(TokenID, PersistentReference, isPrivate: Bool)
    case session(SessionObject)

    var tokenID: TokenID {
        switch self {
        case .token(let t, _, _): t
        case .session(let o): o.tokenID
        }
    }

    var isPrivate: Bool {
        switch self {
        case .token(_, _, let p): p
        case .session(let o): o.isPrivate
        }
    }
}

/// A session object: lives in memory only and dies with its session.
final class SessionObject {
    let tokenID: TokenID
    let owner: CK_SESSION_HANDLE
    let objectClass: CK_OBJECT_CLASS
    let isPrivate: Bool
    let uniqueID: String
    var attributes: AttributeMap

    init(tokenID: TokenID, owner: CK_SESSION_HANDLE, objectClass: CK_OBJECT_CLASS, isPrivate: Bool,
         uniqueID: String, attributes: AttributeMap) {
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
    private(set) var entries: [CK_OBJECT_HANDLE: ObjectEntry] = [:]
    private var byReference: [PersistentReference: CK_OBJECT_HANDLE] = [:]
    /// Decrypted private keys by handle, so a second signature does not parse
    /// PKCS #8 again. Dropped at logout together with the handles.
    var keyCache: [CK_OBJECT_HANDLE: PrivateKey] = [:]

    mutating func handle(token: TokenID, reference: PersistentReference, isPrivate: Bool) -> CK_OBJECT_HANDLE {
        if let h = byReference[reference] { return h }
        let h = allocate()
        entries[h] = .token(token, reference, isPrivate: isPrivate)
        byReference[reference] = h
        return h
    }

    mutating func add(_ object: SessionObject) -> CK_OBJECT_HANDLE {
        let h = allocate()
        entries[h] = .session(object)
        return h
    }

    mutating func newSessionUniqueID() -> String {
        "session-\(next)-\(entries.count)"
    }

    mutating func remove(_ h: CK_OBJECT_HANDLE) {
        if case .token(_, let ref, _)? = entries.removeValue(forKey: h) { byReference[ref] = nil }
        keyCache[h] = nil
    }

    mutating func forget(token: TokenID) {
        for (h, e) in entries where e.tokenID == token { remove(h) }
    }

    mutating func forgetPrivate(token: TokenID) {
        for (h, e) in entries where e.tokenID == token && e.isPrivate { remove(h) }
    }

    mutating func destroySessionObjects(of session: CK_SESSION_HANDLE) {
        for (h, e) in entries {
            if case .session(let o) = e, o.owner == session { remove(h) }
        }
    }

    mutating func removeAll() {
        entries.removeAll()
        byReference.removeAll()
        keyCache.removeAll()
    }

    private mutating func allocate() -> CK_OBJECT_HANDLE {
        let h = next
        next += 1
        return h
    }
}

/// An object as a chapter sees it: its class and every attribute, with the
/// storage attributes the store keeps outside the map filled in.
struct ObjectView {
    let handle: CK_OBJECT_HANDLE
    let entry: ObjectEntry
    let objectClass: CK_OBJECT_CLASS
    var attributes: AttributeMap

    var isToken: Bool { if case .token = entry { true } else { false } }
    var isPrivate: Bool { entry.isPrivate }
    var keyType: CK_KEY_TYPE? { attributes.ulong(CKA_KEY_TYPE) }
    func bool(_ t: CK_ATTRIBUTE_TYPE) -> Bool? { attributes.bool(t) }
}

extension Runtime {
    /// The object behind a handle as this session may see it: another token's
    /// objects, and private objects before user login, do not exist for it.
    func resolve(_ s: Session, _ h: CK_OBJECT_HANDLE) throws -> ObjectView {
        let (entry, key) = try lock.withLock { () throws -> (ObjectEntry, TokenKey?) in
            guard let e = objects.entries[h], e.tokenID == s.tokenID else { throw PKCS11Error.objectHandleInvalid }
            let key = logins[s.tokenID].flatMap { $0.role == .user ? $0.key : nil }
            if e.isPrivate, key == nil { throw PKCS11Error.objectHandleInvalid }
            return (e, key)
        }
        switch entry {
        case .token(_, let ref, _):
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
            a[CKA_PRIVATE] = AttributeCoding.bool(item.isPrivate)
            a[CKA_UNIQUE_ID] = AttributeCoding.string(ref.base64url)
            return ObjectView(handle: h, entry: entry, objectClass: item.itemClass.rawValue, attributes: a)
        case .session(let o):
            var a = lock.withLock { o.attributes }
            a[CKA_CLASS] = AttributeCoding.ulong(o.objectClass)
            a[CKA_TOKEN] = AttributeCoding.bool(false)
            a[CKA_PRIVATE] = AttributeCoding.bool(o.isPrivate)
            a[CKA_UNIQUE_ID] = AttributeCoding.string(o.uniqueID)
            return ObjectView(handle: h, entry: entry, objectClass: o.objectClass, attributes: a)
        }
    }

    /// The decrypted private key of a key object, cached by handle.
    func privateKey(_ view: ObjectView) throws -> PrivateKey {
        if let k = lock.withLock({ objects.keyCache[view.handle] }) { return k }
        guard view.objectClass == CKO_PRIVATE_KEY else { throw PKCS11Error.keyTypeInconsistent }
        guard let der = view.attributes[CKA.keysharePKCS8] else { throw PKCS11Error.keyHandleInvalid }
        let k = try PrivateKey(der: der)
        lock.withLock { objects.keyCache[view.handle] = k }
        return k
    }
}
