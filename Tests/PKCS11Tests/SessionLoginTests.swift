import CPKCS11
@testable import PKCS11
import Testing

struct SessionLoginTests {
    @Test func openSessionRules() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        #expect(rv { _ = try f.rt.openSession(slot: slot, flags: CKF_RW_SESSION) } == CKR_SESSION_PARALLEL_NOT_SUPPORTED)
        #expect(rv { _ = try f.rt.openSession(slot: 0x99, flags: CKF_SERIAL_SESSION) } == CKR_SLOT_ID_INVALID)
        let s = try f.ro(slot)
        let info = try f.rt.sessionInfo(s)
        #expect(info.state == CKS_RO_PUBLIC_SESSION && info.slotID == slot)
        #expect(info.flags == CKF_SERIAL_SESSION)
        try f.rt.closeSession(s)
        #expect(rv { try f.rt.closeSession(s) } == CKR_SESSION_HANDLE_INVALID)
    }

    @Test func loginIsSharedByTheTokensSessions() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let a = try f.ro(slot), b = try f.rw(slot)
        try f.rt.login(session: a, userType: CKU_USER, pin: userPIN)
        #expect(try f.rt.sessionInfo(a).state == CKS_RO_USER_FUNCTIONS)
        #expect(try f.rt.sessionInfo(b).state == CKS_RW_USER_FUNCTIONS)
        #expect(rv { try f.rt.login(session: b, userType: CKU_USER, pin: userPIN) } == CKR_USER_ALREADY_LOGGED_IN)
        #expect(rv { try f.rt.login(session: b, userType: CKU_SO, pin: soPIN) } == CKR_USER_ANOTHER_ALREADY_LOGGED_IN)
        try f.rt.logout(session: b)
        #expect(try f.rt.sessionInfo(a).state == CKS_RO_PUBLIC_SESSION)
        #expect(rv { try f.rt.logout(session: a) } == CKR_USER_NOT_LOGGED_IN)
    }

    @Test func soLoginNeedsNoReadOnlySessions() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let ro = try f.ro(slot), rw = try f.rw(slot)
        #expect(rv { try f.rt.login(session: rw, userType: CKU_SO, pin: soPIN) } == CKR_SESSION_READ_ONLY_EXISTS)
        try f.rt.closeSession(ro)
        try f.rt.login(session: rw, userType: CKU_SO, pin: soPIN)
        #expect(try f.rt.sessionInfo(rw).state == CKS_RW_SO_FUNCTIONS)
        #expect(rv { _ = try f.ro(slot) } == CKR_SESSION_READ_WRITE_SO_EXISTS)
        #expect(rv { try f.rt.login(session: rw, userType: 7, pin: soPIN) } == CKR_USER_TYPE_INVALID)
    }

    @Test func userLoginNeedsAnInitialisedPIN() throws {
        let f = try Fixture()
        let slot = try f.makeToken(withUserPIN: false)
        let s = try f.ro(slot)
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: userPIN) } == CKR_USER_PIN_NOT_INITIALIZED)
        #expect(rv { try f.rt.initPIN(session: s, pin: userPIN) } == CKR_USER_NOT_LOGGED_IN)
    }

    @Test func closingTheLastSessionLogsOut() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.ro(slot)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        try f.rt.closeAllSessions(slot: slot)
        let t = try f.ro(slot)
        #expect(try f.rt.sessionInfo(t).state == CKS_RO_PUBLIC_SESSION)
    }

    @Test func contextSpecificLoginNeedsAnOperation() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.ro(slot)
        #expect(rv { try f.rt.login(session: s, userType: CKU_CONTEXT_SPECIFIC, pin: userPIN) } == CKR_USER_NOT_LOGGED_IN)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(rv { try f.rt.login(session: s, userType: CKU_CONTEXT_SPECIFIC, pin: userPIN) } == CKR_OPERATION_NOT_INITIALIZED)
    }

    /// Issue 28: a PIN outside the advertised bounds (4 to 255 bytes) is
    /// CKR_PIN_LEN_RANGE at C_Login and costs no attempt, for the user, the
    /// SO and a context-specific login alike; a wrong PIN of a valid length
    /// still counts.
    @Test func pinOutsideTheBoundsIsNoAttempt() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        let id = try #require(try f.rt.store.token(slotID: UInt(slot))).tokenID
        func failures() throws -> Int { try #require(try f.rt.store.token(id)).userPINFailures }
        for pin in [[], Array("12".utf8), Array("123".utf8), [UInt8](repeating: 0x31, count: 256)] {
            #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: pin) } == CKR_PIN_LEN_RANGE)
        }
        #expect(try failures() == 0)
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: Array("9999".utf8)) } == CKR_PIN_INCORRECT)
        #expect(try failures() == 1)
        try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
        #expect(try failures() == 0)
        try f.rt.logout(session: s)
        #expect(rv { try f.rt.login(session: s, userType: CKU_SO, pin: Array("12".utf8)) } == CKR_PIN_LEN_RANGE)
        #expect(try #require(try f.rt.store.token(id)).soPINFailures == 0)
    }
}
