import CPKCS11
import Keychain
import KeyshareCrypto

// C_GetOperationState / C_SetOperationState (PKCS #11 3.0 §5.6.x) for
// digests, HMACs (full and general length) and the hashed multi-part
// signature mechanisms (CKM_SHA*_RSA_PKCS(_PSS), CKM_ECDSA_SHA*). OpenSSL's
// pkcs11-provider duplicates a digest or signature context this way.
//
// Design (docs/pkcs11-conformance.md, "Saved operation state"): OpenSSL 3.0
// cannot serialise an EVP_MD_CTX or EVP_MAC_CTX (EVP_MD_CTX_serialize is
// 3.6), and the low-level SHA*_CTX structures are deprecated and cover
// neither SHA-3 nor HMAC. Keeping the input so far would be unbounded. So
// the saved state stays inside the module: C_GetOperationState copies the
// session's operations (EVP_MD_CTX_copy_ex, EVP_MAC_CTX_dup) into a table
// of this Runtime under a random 128-bit ID and hands out a 53-byte blob:
//
//   "KSOS" | version 1 | ID (16) | HMAC-SHA-256 tag (32)
//
// The tag is keyed by a random key of this Runtime (never leaves it) and
// covers the ID, the token, the login state and each saved operation's
// kind, key handle and phase. C_SetOperationState recomputes it with the
// *destination* session's token and login state, so a blob is refused
// (CKR_SAVED_STATE_INVALID) when it is forged, truncated, extended,
// altered in any bit, from another token or login, from an earlier
// C_Initialize, or evicted. Nothing secret is in the blob: an HMAC state
// carries its key, and that key never leaves the module this way. The
// spec allows this: "There is also no guarantee that cryptographic
// operations state may be carried across logins, or across different
// Cryptoki implementations". The table keeps the 1024 most recently used
// states (LRU), and a token's states are dropped at its logout.
//
// Keys: a saved sign or verify operation needs hAuthenticationKey naming
// the same key (CKR_KEY_NEEDED when 0, CKR_KEY_CHANGED for another key),
// which the destination session must be able to see (a private key needs
// the user logged in) and which must still allow the operation; a state
// with no keyed operation takes no key (CKR_KEY_NOT_NEEDED), and
// hEncryptionKey is never needed (encryption states are not saved).
// CKF_RESTORE_KEY_NOT_NEEDED is therefore not set.

/// An operation C_GetOperationState can save: it makes an independent copy
/// of itself (or throws CKR_STATE_UNSAVEABLE).
protocol SaveableOperation: Operation {
    func duplicate() throws -> any Operation
    /// The key the operation uses; nil for a digest.
    var keyHandle: CK_OBJECT_HANDLE? { get }
}

extension SignatureOperation: SaveableOperation {}

/// One saved operation: a private copy and the session's phase for it.
struct SavedOperation {
    let operation: any SaveableOperation
    let keyHandle: CK_OBJECT_HANDLE?
    let multipart: Bool
    let singlePart: Bool

    func duplicate() throws -> SavedOperation {
        guard let copy = try operation.duplicate() as? any SaveableOperation else {
            throw PKCS11Error(CKR_STATE_UNSAVEABLE)
        }
        return SavedOperation(operation: copy, keyHandle: keyHandle, multipart: multipart, singlePart: singlePart)
    }
}

/// The saved states of one Runtime, at most `capacity`, least recently
/// used first out.
final class SavedStateTable: @unchecked Sendable {
    static let capacity = 1024
    static let magic: [UInt8] = Array("KSOS".utf8)
    static let version: UInt8 = 1
    static let blobLength = 4 + 1 + 16 + 32

    struct Entry {
        let tokenID: TokenID
        let role: TokenKey.Role?
        let operations: [OperationKind: SavedOperation]
        var lastUse: UInt64
    }

    private let lock = Lock()
    // Guarded by `lock`.
    private var entries: [[UInt8]: Entry] = [:]
    private var clock: UInt64 = 0
    private var macKey: [UInt8]?

    var count: Int { lock.withLock { entries.count } }

    private func key() throws -> [UInt8] {
        if let macKey { return macKey }
        let k = try SecureRandom.bytes(32)
        macKey = k
        return k
    }

    /// What the tag covers: the ID, where the state may be restored, and
    /// the shape of what was saved.
    private static func tag(key: [UInt8], id: [UInt8], token: TokenID, role: TokenKey.Role?,
                            operations: [OperationKind: SavedOperation]) throws -> [UInt8] {
        var m = Array("keyshare operation state".utf8) + [0, version] + id
        let t = Array(token.description.utf8)
        m += SP800108.encode(UInt64(t.count), bits: 32, littleEndian: false) ?? []
        m += t
        m.append(role == nil ? 0 : role == .user ? 1 : 2)
        for (kind, op) in operations.sorted(by: { $0.key.cancelFlag < $1.key.cancelFlag }) {
            m += SP800108.encode(UInt64(kind.cancelFlag), bits: 64, littleEndian: false) ?? []
            m += SP800108.encode(UInt64(op.keyHandle ?? 0), bits: 64, littleEndian: false) ?? []
            m += [op.keyHandle == nil ? 0 : 1, op.multipart ? 1 : 0, op.singlePart ? 1 : 0]
        }
        return try HMAC.mac(.sha256, key: key, data: m)
    }

    /// Files `operations` and returns the blob that names them.
    func save(_ operations: [OperationKind: SavedOperation], token: TokenID, role: TokenKey.Role?) throws -> [UInt8] {
        let id = try SecureRandom.bytes(16)
        return try lock.withLock { () throws -> [UInt8] in
            let tag = try Self.tag(key: try key(), id: id, token: token, role: role, operations: operations)
            if entries.count >= Self.capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                entries[oldest.key] = nil
            }
            clock += 1
            entries[id] = Entry(tokenID: token, role: role, operations: operations, lastUse: clock)
            return Self.magic + [Self.version] + id + tag
        }
    }

    /// Fresh copies of the operations `blob` names, if it was made by this
    /// table for this token and login state; CKR_SAVED_STATE_INVALID otherwise.
    func restore(_ blob: [UInt8], token: TokenID, role: TokenKey.Role?) throws -> [OperationKind: SavedOperation] {
        let invalid = PKCS11Error(CKR_SAVED_STATE_INVALID)
        guard blob.count == Self.blobLength, Array(blob[0..<4]) == Self.magic, blob[4] == Self.version else {
            throw invalid
        }
        let id = Array(blob[5..<21]), tag = Array(blob[21...])
        return try lock.withLock { () throws -> [OperationKind: SavedOperation] in
            guard let macKey, var e = entries[id] else { throw invalid }
            let expected = try Self.tag(key: macKey, id: id, token: token, role: role, operations: e.operations)
            guard HMAC.equal(expected, tag), e.tokenID == token, e.role == role else { throw invalid }
            clock += 1
            e.lastUse = clock
            entries[id] = e
            // The table keeps its copy: a state may be restored more than once.
            return try e.operations.mapValues { try $0.duplicate() }
        }
    }

    /// A token's states end with its login (C_Logout, its last session closed).
    func forget(token: TokenID) {
        lock.withLock { entries = entries.filter { $0.value.tokenID != token } }
    }
}

extension Session {
    /// Copies of this session's cryptographic operations (a search is not
    /// one); CKR_OPERATION_NOT_INITIALIZED when there is none,
    /// CKR_STATE_UNSAVEABLE when one cannot be copied (encryption,
    /// decryption, raw-input signatures, a card's operation).
    func saveableOperations() throws -> [OperationKind: SavedOperation] {
        try lock.withLock { () throws -> [OperationKind: SavedOperation] in
            var out: [OperationKind: SavedOperation] = [:]
            for (kind, op) in operations where kind != .find {
                guard let op = op as? any SaveableOperation,
                      let copy = try op.duplicate() as? any SaveableOperation else {
                    throw PKCS11Error(CKR_STATE_UNSAVEABLE)
                }
                out[kind] = SavedOperation(operation: copy, keyHandle: op.keyHandle,
                                           multipart: multipart.contains(kind), singlePart: singlePart.contains(kind))
            }
            guard !out.isEmpty else { throw PKCS11Error.operationNotInitialized }
            return out
        }
    }

    /// C_SetOperationState: every active operation, a search included, is
    /// cancelled and the saved ones take their place with their phase.
    func replaceOperations(_ saved: [OperationKind: SavedOperation]) {
        lock.withLock {
            operations = OperationTable(saved.mapValues { $0.operation })
            multipart = OperationKindSet(saved.filter { $0.value.multipart }.keys)
            singlePart = OperationKindSet(saved.filter { $0.value.singlePart }.keys)
        }
    }
}

extension Runtime {
    func loginRole(_ s: Session) -> TokenKey.Role? { login(for: s.tokenID)?.role }

    /// C_GetOperationState with the output convention of §5.2 (a length
    /// query and a short buffer file nothing).
    public func getOperationState(session h: CK_SESSION_HANDLE, capacity: Int?) throws -> OutputResult {
        let s = try session(h)
        let ops = try s.saveableOperations()
        if let r = OutputResult.decide(needed: SavedStateTable.blobLength, capacity: capacity) { return r }
        return .bytes(try savedStates.save(ops, token: s.tokenID, role: loginRole(s)))
    }

    public func setOperationState(session h: CK_SESSION_HANDLE, state: [UInt8], encryptionKey: CK_OBJECT_HANDLE,
                                  authenticationKey: CK_OBJECT_HANDLE) throws {
        let s = try session(h)
        let saved = try savedStates.restore(state, token: s.tokenID, role: loginRole(s))
        // No encryption or decryption state is ever saved.
        if encryptionKey != 0 { throw PKCS11Error(CKR_KEY_NOT_NEEDED) }
        let keyed = saved.filter { $0.value.keyHandle != nil }
        if keyed.isEmpty {
            if authenticationKey != 0 { throw PKCS11Error(CKR_KEY_NOT_NEEDED) }
        } else {
            if authenticationKey == 0 { throw PKCS11Error(CKR_KEY_NEEDED) }
            // A sign and a verify state with two different keys cannot both be
            // named by one handle: CKR_KEY_CHANGED for the one that differs.
            guard keyed.allSatisfy({ $0.value.keyHandle == authenticationKey }) else {
                throw PKCS11Error(CKR_KEY_CHANGED)
            }
            let view = try resolveKey(s, authenticationKey)
            for kind in keyed.keys {
                let flag: CK_ATTRIBUTE_TYPE = kind == .sign || view.objectClass == CKO_PRIVATE_KEY ? CKA_SIGN : CKA_VERIFY
                guard view.bool(flag) == true else { throw PKCS11Error.keyFunctionNotPermitted }
            }
        }
        s.replaceOperations(saved)
    }
}
