import CPKCS11
import Keychain
import KeyshareCrypto

/// One session's last resolved key (`Runtime.resolveKey`), so that an
/// application calling C_EncryptInit (or any key-taking Init) per message
/// with the same key does not pay the key's resolution each time: two
/// locks of the runtime, the handle and login look-ups, the store's change
/// counter and the view cache (about 1,600 instructions of an AES-GCM
/// C_EncryptInit + C_Encrypt pair of ~11,500, docs/benchmarks.md).
///
/// Only the resolution is saved: the caller still checks the returned view
/// exactly as before (CKA_ALLOWED_MECHANISMS, class, type, usage flag, key
/// size), so no decision is taken from the memo that would not be taken
/// from a fresh view.
///
/// What keeps it current:
/// - `Runtime.objectGeneration`, which moves with every change of the
///   object table (a handle made or dropped, a destroy, a logout's dropped
///   private handles, a view re-read) and of the login table (C_Login,
///   C_Logout, the agent's shared unlock), and with every
///   C_SetAttributeValue on a session object: a memo made under another
///   generation is never used. The one exception is a new session object
///   (`Runtime.store`): a handle never seen before changes no memoized view,
///   and a KEM or derivation call per message makes one every time;
/// - for a token object, the store's change counter, as the view cache
///   (`ObjectTable.viewCache`): any commit by any process invalidates it;
/// - it is dropped outright (key bytes and all, with the session's keyed
///   cipher contexts, KeyedCipherCache.swift) in every session of the
///   token at C_DestroyObject and C_SetAttributeValue, and in the session
///   at C_CloseSession, C_Logout, token removal and C_Finalize
///   (`Session.endAll`).
///
/// Its own lock, not the session's: `resolveKey` is also called from
/// inside operation steps that hold the session lock (C_DigestKey).
final class ResolvedKeyMemo: @unchecked Sendable {
    private let lock = Lock()
    /// A class, so taking it out under the lock is one retain (a tuple
    /// holding the view was copied field by field through value witnesses).
    private final class Entry {
        let handle: CK_OBJECT_HANDLE
        let generation: UInt64
        let counter: UInt64
        let view: ObjectView
        /// The key value a cipher Init took from `view` after every check
        /// passed, with the caller's mechanism type and direction it was
        /// checked for (CheckedCipherKey.swift). Guarded by the memo's lock.
        @exclusivity(unchecked) var cipherKey: (type: CK_MECHANISM_TYPE, encrypting: Bool, key: [UInt8])?

        init(_ handle: CK_OBJECT_HANDLE, _ generation: UInt64, _ counter: UInt64, _ view: ObjectView) {
            self.handle = handle
            self.generation = generation
            self.counter = counter
            self.view = view
        }
    }
    @exclusivity(unchecked) private var entry: Entry?

    /// The memo for `handle` if it was made under `generation`; a token
    /// object's also needs the store's counter unchanged (`counter` reads it).
    func view(_ handle: CK_OBJECT_HANDLE, generation: UInt64, counter: () throws -> UInt64) rethrows -> ObjectView? {
        guard let e = lock.withLock({ entry }), e.handle == handle, e.generation == generation else { return nil }
        if e.view.isToken, try counter() != e.counter { return nil }
        return e.view
    }

    /// The checked key value for `handle` under `generation` (and, for a
    /// token object, the store's counter), if the last cipher Init checked
    /// it for the same mechanism type and direction.
    func cipherKey(_ handle: CK_OBJECT_HANDLE, generation: UInt64, counter: () throws -> UInt64,
                   type: CK_MECHANISM_TYPE, encrypting: Bool) rethrows -> [UInt8]? {
        guard let (e, ck) = lock.withLock({ entry.map { ($0, $0.cipherKey) } }), e.handle == handle, e.generation == generation,
              let ck, ck.type == type, ck.encrypting == encrypting else { return nil }
        if e.view.isToken, try counter() != e.counter { return nil }
        return ck.key
    }

    /// Records what a cipher Init checked, on the entry it resolved
    /// (the same handle under the same generation; otherwise nothing).
    func setCipherKey(_ handle: CK_OBJECT_HANDLE, generation: UInt64, type: CK_MECHANISM_TYPE, encrypting: Bool,
                      key: [UInt8]) {
        lock.withLock {
            guard let e = entry, e.handle == handle, e.generation == generation else { return }
            e.cipherKey = (type, encrypting, key)
        }
    }

    func set(_ handle: CK_OBJECT_HANDLE, generation: UInt64, counter: UInt64, _ view: ObjectView) {
        let e = Entry(handle, generation, counter, view)
        lock.withLock { entry = e }
    }

    func clear() {
        lock.withLock { entry = nil }
    }

    /// Whether nothing is memoized (the tests' view of the drop rules).
    var isEmpty: Bool { lock.withLock { entry == nil } }
}

extension Runtime {
    /// `resolve` for the key-taking functions, through the session's memo.
    /// The generation is read before the resolution, so a change made
    /// while it runs leaves a memo that is never used.
    func resolveMemoized(_ s: Session, _ h: CK_OBJECT_HANDLE) throws -> ObjectView {
        let generation = lock.withLock { objectGeneration }
        if let v = try s.keyMemo.view(h, generation: generation, counter: { try store.changeCounter() }) { return v }
        let counter = try store.changeCounter()
        let view = try resolve(s, h)
        s.keyMemo.set(h, generation: generation, counter: counter, view)
        return view
    }

    /// Called with `lock` held: every session of `token` forgets its
    /// resolved key and its keyed cipher contexts (C_DestroyObject,
    /// C_SetAttributeValue: no key schedule or key copy outlives the change).
    func dropKeyedStateLocked(token: TokenID) {
        for s in sessions.values where s.tokenID == token { s.dropKeyedState() }
    }
}

extension Session {
    /// The memo and the keyed cipher contexts go (each under its own lock).
    func dropKeyedState() {
        keyMemo.clear()
        cipherCache.clear()
    }
}
