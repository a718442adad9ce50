import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// C_GetOperationState / C_SetOperationState (OperationState.swift) and
/// C_SessionCancel (SessionCancel.swift).
struct OperationStateTests {
    func loggedIn() throws -> (Fixture, CK_SLOT_ID, CK_SESSION_HANDLE) {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        return (f, slot, s)
    }

    func bytes(_ r: OutputResult) -> [UInt8] {
        if case .bytes(let b) = r { return b }
        Issue.record("expected bytes, got \(r)")
        return []
    }

    func save(_ f: Fixture, _ s: CK_SESSION_HANDLE) throws -> [UInt8] {
        #expect(try f.rt.getOperationState(session: s, capacity: nil) == .length(SavedStateTable.blobLength))
        #expect(try f.rt.getOperationState(session: s, capacity: 10) == .tooSmall(SavedStateTable.blobLength))
        return bytes(try f.rt.getOperationState(session: s, capacity: 64))
    }

    func hmacKey(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ value: [UInt8] = Array(repeating: 7, count: 32)) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET), Attribute(CKA_VALUE, value),
            .bool(CKA_SIGN, true), .bool(CKA_VERIFY, true),
        ])
    }

    static let part1 = Array("The quick brown fox jumps over ".utf8) + [UInt8](repeating: 0x5a, count: 150)
    static let part2 = Array("the lazy dog".utf8)

    /// Restoring gives the digest of an uninterrupted operation, in another
    /// session, more than once, and the source session goes on unchanged.
    @Test(arguments: [DigestAlgorithm.sha1, .sha256, .sha512_224, .sha3_256, .sha3_512])
    func digestStateRestores(_ d: DigestAlgorithm) throws {
        let (f, slot, s) = try loggedIn()
        let whole = d.hash(Self.part1 + Self.part2)
        try f.rt.digestInit(session: s, mechanism: .digest(d))
        try f.rt.digestUpdate(session: s, part: Self.part1)
        let blob = try save(f, s)
        #expect(blob.count == 53)
        try f.rt.digestUpdate(session: s, part: Self.part2)
        #expect(bytes(try f.rt.digestFinal(session: s, capacity: 64)) == whole)
        for _ in 0..<2 {
            let t = try f.ro(slot)
            try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: 0)
            try f.rt.digestUpdate(session: t, part: Self.part2)
            #expect(bytes(try f.rt.digestFinal(session: t, capacity: 64)) == whole)
        }
        // A digest state takes no key.
        let t = try f.rw(slot)
        #expect(rv { try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: 5) }
                == CKR_KEY_NOT_NEEDED)
        #expect(rv { try f.rt.setOperationState(session: t, state: blob, encryptionKey: 5, authenticationKey: 0) }
                == CKR_KEY_NOT_NEEDED)
    }

    /// HMAC (full and general length): the key must be named, and be the same key.
    @Test func hmacStateNeedsItsKey() throws {
        let (f, slot, s) = try loggedIn()
        let key = try hmacKey(f, s)
        let other = try hmacKey(f, s, Array(repeating: 9, count: 32))
        for m in [Mechanism.hmac(.sha3_256), .hmacGeneral(.sha384, length: 20)] {
            try f.rt.signInit(session: s, mechanism: m, key: key)
            try f.rt.signUpdate(session: s, part: Self.part1)
            let blob = try save(f, s)
            try f.rt.signUpdate(session: s, part: Self.part2)
            let mac = bytes(try f.rt.signFinal(session: s, capacity: 64))
            let t = try f.rw(slot)
            #expect(rv { try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: 0) }
                    == CKR_KEY_NEEDED)
            #expect(rv { try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: other) }
                    == CKR_KEY_CHANGED)
            #expect(rv { try f.rt.setOperationState(session: t, state: blob, encryptionKey: key, authenticationKey: key) }
                    == CKR_KEY_NOT_NEEDED)
            #expect(!(try f.rt.session(t).isActive(.sign)))
            try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: key)
            try f.rt.signUpdate(session: t, part: Self.part2)
            #expect(bytes(try f.rt.signFinal(session: t, capacity: 64)) == mac)
            // Verify states too.
            try f.rt.verifyInit(session: s, mechanism: m, key: key)
            try f.rt.verifyUpdate(session: s, part: Self.part1)
            let vblob = try save(f, s)
            try f.rt.setOperationState(session: t, state: vblob, encryptionKey: 0, authenticationKey: key)
            try f.rt.verifyUpdate(session: t, part: Self.part2)
            try f.rt.verifyFinal(session: t, signature: mac)
            try f.rt.verifyUpdate(session: s, part: Self.part2)
            try f.rt.verifyFinal(session: s, signature: mac)
        }
    }

    /// A hashed multi-part signature: RSA PKCS #1 v1.5 is deterministic, so
    /// the restored operation's signature is byte for byte the original's.
    @Test func signatureStateRestores() throws {
        let (f, slot, s) = try loggedIn()
        let (pub, priv) = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_RSA_PKCS_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [.ulong(CKA_MODULUS_BITS, 1024), .bool(CKA_VERIFY, true)],
            privateTemplate: [.bool(CKA_SIGN, true)])
        try f.rt.signInit(session: s, mechanism: .rsaPKCSWith(.sha256), key: priv)
        try f.rt.signUpdate(session: s, part: Self.part1)
        let blob = try save(f, s)
        try f.rt.signUpdate(session: s, part: Self.part2)
        let sig = bytes(try f.rt.signFinal(session: s, capacity: 512))
        let t = try f.rw(slot)
        #expect(rv { try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: pub) }
                == CKR_KEY_CHANGED)
        try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: priv)
        try f.rt.signUpdate(session: t, part: Self.part2)
        #expect(bytes(try f.rt.signFinal(session: t, capacity: 512)) == sig)
        try f.rt.verifyInit(session: s, mechanism: .rsaPKCSWith(.sha256), key: pub)
        try f.rt.verifyUpdate(session: s, part: Self.part1)
        let vblob = try save(f, s)
        try f.rt.setOperationState(session: t, state: vblob, encryptionKey: 0, authenticationKey: pub)
        try f.rt.verifyUpdate(session: t, part: Self.part2)
        try f.rt.verifyFinal(session: t, signature: sig)
        // A raw-input scheme keeps up to 1 MiB of input: not saved.
        let ec = try f.rt.generateKeyPair(
            session: s, mechanism: try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil),
            publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER)], privateTemplate: [.bool(CKA_SIGN, true)])
        try f.rt.signInit(session: t, mechanism: .ecdsa, key: ec.1)
        try f.rt.signUpdate(session: t, part: [UInt8](repeating: 1, count: 32))
        #expect(rv { _ = try f.rt.getOperationState(session: t, capacity: 64) } == CKR_STATE_UNSAVEABLE)
        #expect(try f.rt.session(t).isActive(.sign), "a failed save leaves the operation alone")
    }

    /// Forged, truncated, extended, bit-flipped, replayed into another
    /// token, after a logout: CKR_SAVED_STATE_INVALID, and the destination
    /// session is left as it was.
    @Test func badBlobsAreRefused() throws {
        let (f, slot, s) = try loggedIn()
        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        try f.rt.digestUpdate(session: s, part: Self.part1)
        let blob = try save(f, s)
        let t = try f.rw(slot)
        try f.rt.digestInit(session: t, mechanism: .digest(.sha1))
        func refused(_ b: [UInt8], session: CK_SESSION_HANDLE? = nil) -> Bool {
            rv { try f.rt.setOperationState(session: session ?? t, state: b, encryptionKey: 0, authenticationKey: 0) }
                == CKR_SAVED_STATE_INVALID
        }
        var forged = SavedStateTable.magic + [1]
        forged += (0..<48).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        #expect(refused(forged))
        #expect(refused(Array(blob.dropLast())))
        #expect(refused(blob + [0]))
        #expect(refused([]))
        var flips = 0
        for i in 0..<blob.count {
            for bit in 0..<8 {
                var b = blob
                b[i] ^= UInt8(1 << bit)
                if refused(b) { flips += 1 }
            }
        }
        #expect(flips == blob.count * 8, "\(flips) of \(blob.count * 8) single-bit changes refused")
        #expect(try f.rt.session(t).isActive(.digest), "refused blobs leave the destination's operations alone")
        // Another token of the same process.
        let slot2 = try f.makeToken(label: "other")
        let u = try f.rw(slot2)
        #expect(refused(blob, session: u))
        // The genuine blob still works here, then not after a logout.
        try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: 0)
        try f.rt.logout(session: s)
        #expect(refused(blob))
    }

    @Test func unsaveableAndNothingToSave() throws {
        let (f, _, s) = try loggedIn()
        #expect(rv { _ = try f.rt.getOperationState(session: s, capacity: nil) } == CKR_OPERATION_NOT_INITIALIZED)
        try f.rt.findObjectsInit(session: s, template: [])
        #expect(rv { _ = try f.rt.getOperationState(session: s, capacity: nil) } == CKR_OPERATION_NOT_INITIALIZED)
        let aes = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_AES_KEY_GEN, parameter: nil),
                                       template: [.ulong(CKA_VALUE_LEN, 16), .bool(CKA_ENCRYPT, true)])
        try f.rt.encryptInit(session: s, mechanism: .aesCBC(iv: [UInt8](repeating: 0, count: 16), pad: true), key: aes)
        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        #expect(rv { _ = try f.rt.getOperationState(session: s, capacity: nil) } == CKR_STATE_UNSAVEABLE)
        try f.rt.sessionCancel(session: s, flags: CKF_ENCRYPT)
        #expect(try f.rt.getOperationState(session: s, capacity: nil) == .length(53))
    }

    /// The restored session finishes the way the saved one had to: a state
    /// saved after a single-part length query goes on with C_Digest only;
    /// and restoring ends whatever the destination had running.
    @Test func restoreKeepsThePhaseAndReplacesOperations() throws {
        let (f, slot, s) = try loggedIn()
        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        #expect(try f.rt.digest(session: s, data: Self.part1, capacity: nil) == .length(32))
        let blob = try save(f, s)
        let t = try f.rw(slot)
        try f.rt.findObjectsInit(session: t, template: [])
        try f.rt.signInit(session: t, mechanism: .hmac(.sha256), key: try hmacKey(f, s))
        try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: 0)
        let ts = try f.rt.session(t)
        #expect(!ts.isActive(.find) && !ts.isActive(.sign))
        #expect(rv { try f.rt.digestUpdate(session: t, part: [1]) } == CKR_OPERATION_ACTIVE)
        try f.rt.setOperationState(session: t, state: blob, encryptionKey: 0, authenticationKey: 0)
        #expect(bytes(try f.rt.digest(session: t, data: Self.part1, capacity: 32)) == DigestAlgorithm.sha256.hash(Self.part1))
    }

    /// At most `capacity` states; the least recently used goes first.
    @Test func tableIsBounded() throws {
        let (f, slot, s) = try loggedIn()
        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        let first = bytes(try f.rt.getOperationState(session: s, capacity: 64))
        var last: [UInt8] = []
        for _ in 0..<(SavedStateTable.capacity + 8) { last = bytes(try f.rt.getOperationState(session: s, capacity: 64)) }
        #expect(f.rt.savedStates.count == SavedStateTable.capacity)
        let t = try f.rw(slot)
        #expect(rv { try f.rt.setOperationState(session: t, state: first, encryptionKey: 0, authenticationKey: 0) }
                == CKR_SAVED_STATE_INVALID)
        try f.rt.setOperationState(session: t, state: last, encryptionKey: 0, authenticationKey: 0)
    }

    /// PKCS #11 3.0 §5.6.5: the named operations end, the others stay;
    /// no flag and unknown flags change nothing.
    @Test func sessionCancel() throws {
        let (f, _, s) = try loggedIn()
        let key = try hmacKey(f, s)
        try f.rt.digestInit(session: s, mechanism: .digest(.sha256))
        try f.rt.signInit(session: s, mechanism: .hmac(.sha256), key: key)
        try f.rt.verifyInit(session: s, mechanism: .hmac(.sha256), key: key)
        try f.rt.findObjectsInit(session: s, template: [])
        let session = try f.rt.session(s)
        try f.rt.sessionCancel(session: s, flags: 0)
        try f.rt.sessionCancel(session: s, flags: CKF_GENERATE | CKF_HW | 0x8000_0000)
        #expect(session.isActive(.digest) && session.isActive(.sign) && session.isActive(.verify) && session.isActive(.find))
        try f.rt.sessionCancel(session: s, flags: CKF_DIGEST | CKF_ENCRYPT)
        #expect(!session.isActive(.digest) && session.isActive(.sign))
        try f.rt.sessionCancel(session: s, flags: CKF_SIGN | CKF_FIND_OBJECTS)
        #expect(!session.isActive(.sign) && !session.isActive(.find) && session.isActive(.verify))
        try f.rt.sessionCancel(session: s, flags: CKF_VERIFY)
        #expect(!session.isActive(.verify))
        // A cancelled operation can be started again at once.
        try f.rt.signInit(session: s, mechanism: .hmac(.sha256), key: key)
        #expect(rv { try f.rt.sessionCancel(session: 0xdead, flags: CKF_SIGN) } == CKR_SESSION_HANDLE_INVALID)
    }
}
