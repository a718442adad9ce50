import CPKCS11
import Keychain
@testable import PKCS11
import Testing

struct SlotTokenTests {
    @Test func freeSlotAloneThenTokenSlotAppears() throws {
        let f = try Fixture()
        #expect(try f.rt.slotList(tokenPresent: true) == [freeSlotID])
        let free = try f.rt.tokenInfo(freeSlotID)
        #expect(free.flags & CKF_TOKEN_INITIALIZED == 0)
        #expect(rv { _ = try f.rt.openSession(slot: freeSlotID, flags: CKF_SERIAL_SESSION) } == CKR_TOKEN_NOT_RECOGNIZED)

        let slot = try f.makeToken(label: "alpha", withUserPIN: false)
        #expect(slot >= 0x100)
        #expect(try f.rt.slotList(tokenPresent: false) == [slot, freeSlotID])
        let info = try f.rt.tokenInfo(slot)
        #expect(info.label == "alpha")
        #expect(info.flags & CKF_TOKEN_INITIALIZED != 0)
        #expect(info.flags & CKF_LOGIN_REQUIRED != 0)
        #expect(info.flags & CKF_RNG != 0)
        #expect(info.flags & CKF_USER_PIN_INITIALIZED == 0)
        #expect(rv { _ = try f.rt.slotInfo(0x42) } == CKR_SLOT_ID_INVALID)
    }

    @Test func pinCountersBecomeTokenFlags() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        #expect(try f.rt.tokenInfo(slot).flags & CKF_USER_PIN_INITIALIZED != 0)
        let s = try f.ro(slot)
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: Array("9999".utf8)) } == CKR_PIN_INCORRECT)
        let flags = try f.rt.tokenInfo(slot).flags
        #expect(flags & CKF_USER_PIN_COUNT_LOW != 0)
        #expect(flags & CKF_USER_PIN_LOCKED == 0)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(try f.rt.tokenInfo(slot).flags & CKF_USER_PIN_COUNT_LOW == 0)
    }

    @Test func lockoutAfterMaxAttempts() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.ro(slot)
        var last = CKR_OK
        for _ in 0..<20 {
            last = rv { try f.rt.login(session: s, userType: CKU_USER, pin: Array("9999".utf8)) }
            if last == CKR_PIN_LOCKED { break }
            if try f.rt.tokenInfo(slot).flags & CKF_USER_PIN_FINAL_TRY != 0 {
                #expect(try f.rt.tokenInfo(slot).flags & CKF_USER_PIN_COUNT_LOW != 0)
            }
        }
        #expect(last == CKR_PIN_LOCKED)
        #expect(try f.rt.tokenInfo(slot).flags & CKF_USER_PIN_LOCKED != 0)
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: userPIN) } == CKR_PIN_LOCKED)
    }

    @Test func initTokenOnExistingTokenChecksSOPINAndSessions() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        #expect(rv { try f.rt.initToken(slot: slot, soPIN: soPIN, label: "x") } == CKR_SESSION_EXISTS)
        try f.rt.closeSession(s)
        #expect(rv { try f.rt.initToken(slot: slot, soPIN: Array("4321".utf8), label: "x") } == CKR_PIN_INCORRECT)
        try f.rt.initToken(slot: slot, soPIN: soPIN, label: "renamed")
        let info = try f.rt.tokenInfo(slot)
        #expect(info.label == "renamed")
        #expect(info.flags & CKF_USER_PIN_INITIALIZED == 0)
        #expect(rv { try f.rt.initToken(slot: freeSlotID, soPIN: Array("12".utf8), label: "short") } == CKR_PIN_LEN_RANGE)
    }

    @Test func setPINChangesTheUserPIN() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        try f.rt.setPIN(session: s, old: userPIN, new: Array("5678".utf8))
        try f.rt.logout(session: s)
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: userPIN) } == CKR_PIN_INCORRECT)
        try f.rt.login(session: s, userType: CKU_USER, pin: Array("5678".utf8))
        let ro = try f.ro(slot)
        #expect(rv { try f.rt.setPIN(session: ro, old: userPIN, new: userPIN) } == CKR_SESSION_READ_ONLY)
    }

    @Test func mechanismCatalog() throws {
        let f = try Fixture()
        let slot = try f.makeToken(withUserPIN: false)
        let list = try f.rt.mechanismList(slot: slot)
        #expect(list.contains(CKM_ECDSA) && list.contains(CKM_SHA256_RSA_PKCS) && list.contains(CKM_RSA_PKCS_PSS))
        let ec = try f.rt.mechanismInfo(slot: slot, type: CKM_ECDSA)
        // P-192 to P-521 since issue 13 added the legacy and brainpool curves.
        #expect(ec.minKeySize == 192 && ec.maxKeySize == 521)
        #expect(ec.flags & CKF_SIGN != 0 && ec.flags & CKF_EC_NAMEDCURVE != 0)
        #expect(rv { _ = try f.rt.mechanismInfo(slot: slot, type: CKM_RC2_CBC) } == CKR_MECHANISM_INVALID)
    }

    @Test func insertionAndRemovalAreSlotEvents() throws {
        let f = try Fixture()
        #expect(rv { _ = try f.rt.waitForSlotEvent(block: false) } == CKR_NO_EVENT)
        let slot = try f.makeToken(withUserPIN: false)
        #expect(try f.rt.waitForSlotEvent(block: false) == slot)
        #expect(try f.rt.pollSlotEvent() == nil)
        let rec = try #require(try f.rt.store.token(slotID: UInt(slot)))
        let s = try f.ro(slot)
        _ = try f.rt.slotList(tokenPresent: true)
        try f.rt.store.setPresent(rec.tokenID, false)
        #expect(try f.rt.waitForSlotEvent(block: true) == slot)
        #expect(try f.rt.slotList(tokenPresent: true) == [freeSlotID])
        #expect(try f.rt.slotInfo(slot).flags & CKF_TOKEN_PRESENT == 0)
        #expect(rv { _ = try f.rt.tokenInfo(slot) } == CKR_TOKEN_NOT_PRESENT)
        #expect(rv { _ = try f.rt.sessionInfo(s) } == CKR_SESSION_HANDLE_INVALID)
        #expect(rv { _ = try f.rt.openSession(slot: slot, flags: CKF_SERIAL_SESSION) } == CKR_TOKEN_NOT_PRESENT)
        try f.rt.store.setPresent(rec.tokenID, true)
        #expect(try f.rt.pollSlotEvent() == slot)
    }

    @Test func paddingKeepsWholeCharacters() {
        #expect(padded("ab", 4) == [0x61, 0x62, 0x20, 0x20])
        #expect(padded("aé", 2) == [0x61, 0x20])
        #expect(unpadded([0x74, 0x20, 0x20]) == "t")
    }
}
