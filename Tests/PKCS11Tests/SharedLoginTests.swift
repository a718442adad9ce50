import CPKCS11
import Keychain
@testable import PKCS11
import Testing

/// The agent's cross-process unlock as one application's runtime sees it
/// (SharedLogin.swift, docs/agent.md "Unlock across processes"), and the
/// policy's hidden tokens (Runtime.hidden).
struct SharedLoginTests {
    private func unlocked(_ f: Fixture, _ slot: CK_SLOT_ID, generation: UInt64) throws -> (TokenID, [TokenID: SharedUnlock]) {
        let rec = try #require(try f.rt.tokenRecord(slot: slot))
        let key = try f.rt.store.unlockUser(rec.tokenID, pin: userPIN)
        return (rec.tokenID, [rec.tokenID: SharedUnlock(key: key, generation: generation)])
    }

    @Test func sharedUnlockLogsTheApplicationInUntilLock() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let (_, table) = try unlocked(f, slot, generation: 1)
        #expect(try f.rt.tokenInfo(slot).flags & CKF_LOGIN_REQUIRED != 0)
        f.rt.applySharedUnlocks(table)
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_USER_FUNCTIONS)
        #expect(try f.rt.tokenInfo(slot).flags & CKF_LOGIN_REQUIRED == 0)
        f.rt.applySharedUnlocks([:])  // lock
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_PUBLIC_SESSION)
        #expect(try f.rt.tokenInfo(slot).flags & CKF_LOGIN_REQUIRED != 0)
    }

    @Test func loginTakesTheSharedUnlockOverAndSurvivesLock() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let (_, table) = try unlocked(f, slot, generation: 1)
        f.rt.applySharedUnlocks(table)
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: Array("9999".utf8)) } == CKR_PIN_INCORRECT)
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_USER_FUNCTIONS)  // the shared login stays
        #expect(rv { try f.rt.login(session: s, userType: CKU_SO, pin: soPIN) } == CKR_USER_ANOTHER_ALREADY_LOGGED_IN)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        f.rt.applySharedUnlocks([:])
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_USER_FUNCTIONS)  // its own login now
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: userPIN) } == CKR_USER_ALREADY_LOGGED_IN)
    }

    @Test func logoutDeclinesTheUnlockUntilTheNextOne() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let (_, first) = try unlocked(f, slot, generation: 1)
        f.rt.applySharedUnlocks(first)
        try f.rt.logout(session: s)
        f.rt.applySharedUnlocks(first)
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_PUBLIC_SESSION)
        let (_, second) = try unlocked(f, slot, generation: 2)
        f.rt.applySharedUnlocks(second)
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_USER_FUNCTIONS)
    }

    /// A connection thread computes the table (token unlocked), then `keyshare
    /// lock` or the expiry sweep applies the newer, empty table, then the
    /// connection thread applies its older one: the login must stay ended
    /// (before the snapshot numbers it was re-added and the key stayed in the
    /// client's runtime until its next call).
    @Test func anOlderTableNeverUndoesANewerOne() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let (token, table) = try unlocked(f, slot, generation: 1)
        f.rt.applySharedUnlocks(table, snapshot: 1)
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_USER_FUNCTIONS)
        f.rt.applySharedUnlocks([:], snapshot: 3)  // the sweep: computed later, applied first
        f.rt.applySharedUnlocks(table, snapshot: 2)  // the connection's stale table
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_PUBLIC_SESSION)
        #expect(f.rt.userKey(for: token) == nil)
        f.rt.applySharedUnlocks(table, snapshot: 4)  // a later unlock applies
        #expect(try f.rt.sessionInfo(s).state == CKS_RW_USER_FUNCTIONS)
    }

    @Test func hiddenTokensHaveNoSlot() throws {
        let f = try Fixture()
        let shown = try f.makeToken(label: "shown")
        let secret = try f.makeToken(label: "secret")
        let secretID = try #require(try f.rt.tokenRecord(slot: secret)).tokenID
        let rt = try Runtime(home: f.home, hidden: { $0 == secretID })
        defer { rt.shutdown() }
        let slots = try rt.slotList(tokenPresent: true)
        #expect(slots.contains(shown) && !slots.contains(secret))
        #expect(rv { _ = try rt.openSession(slot: secret, flags: CKF_SERIAL_SESSION) } == CKR_SLOT_ID_INVALID)
        #expect(rv { _ = try rt.tokenInfo(secret) } == CKR_SLOT_ID_INVALID)
        #expect(rv { _ = try rt.slotInfo(secret) } == CKR_SLOT_ID_INVALID)
        // A shared unlock of a hidden token never logs the application in.
        let key = try rt.store.unlockUser(secretID, pin: userPIN)
        rt.applySharedUnlocks([secretID: SharedUnlock(key: key, generation: 1)])
        #expect(rt.userKey(for: secretID) == nil)
    }
}
