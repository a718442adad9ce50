import Testing
import KeychainTestSupport
@testable import Keychain
import KeyshareCrypto

@Suite struct PINTests {
    let wrong = Array("not-the-pin".utf8)

    @Test func wrongPINIsCountedAndPersisted() throws {
        let home = TempHome()
        let token: TokenID
        do {
            let store = try home.store()
            token = try makeToken(store, maxAttempts: 4)
            #expect(throws: KeychainError.pinIncorrect(remaining: 3)) { _ = try store.unlockUser(token, pin: wrong) }
            #expect(throws: KeychainError.pinIncorrect(remaining: 2)) { _ = try store.unlockUser(token, pin: wrong) }
        }
        let store = try home.store()
        #expect(try store.token(token)?.userPINFailures == 2)
        #expect(try store.token(token)?.userPINRemaining == 2)
        _ = try store.unlockUser(token, pin: userPIN)
        #expect(try store.token(token)?.userPINFailures == 0)
    }

    @Test func lockAfterMaxThenSOUnlocks() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store, maxAttempts: 3)
        let key = try store.unlockUser(token, pin: userPIN)
        let ref = try store.add(token: token, itemClass: .secretKey, attributes: [CKA.value: Array("kept".utf8)], key: key)
        for remaining in [2, 1, 0] {
            #expect(throws: KeychainError.pinIncorrect(remaining: remaining)) { _ = try store.unlockUser(token, pin: wrong) }
        }
        #expect(try store.token(token)?.userPINLocked == true)
        #expect(throws: KeychainError.pinLocked) { _ = try store.unlockUser(token, pin: userPIN) }
        // Another process sees the lock too.
        #expect(throws: KeychainError.pinLocked) { _ = try home.store().unlockUser(token, pin: userPIN) }

        #expect(throws: KeychainError.self) { try store.initUserPIN(token, soKey: key, newPIN: [1, 2, 3, 4]) }
        let so = try store.unlockSO(token, pin: soPIN)
        try store.initUserPIN(token, soKey: so, newPIN: Array("fresh-pin".utf8))
        let rec = try #require(try store.token(token))
        #expect(!rec.userPINLocked && rec.userPINFailures == 0)
        let newKey = try store.unlockUser(token, pin: Array("fresh-pin".utf8))
        #expect(try store.item(ref, key: newKey).attributes[CKA.value] == Array("kept".utf8))
        #expect(throws: KeychainError.pinIncorrect(remaining: 2)) { _ = try store.unlockUser(token, pin: userPIN) }
    }

    @Test func soPINLocks() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store, maxAttempts: 2)
        #expect(throws: KeychainError.pinIncorrect(remaining: 1)) { _ = try store.unlockSO(token, pin: wrong) }
        #expect(throws: KeychainError.pinIncorrect(remaining: 0)) { _ = try store.unlockSO(token, pin: wrong) }
        #expect(throws: KeychainError.pinLocked) { _ = try store.unlockSO(token, pin: soPIN) }
        #expect(try store.token(token)?.soPINLocked == true)
        // The user PIN is independent.
        _ = try store.unlockUser(token, pin: userPIN)
    }

    @Test func changePINsKeepKeys() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let key = try store.unlockUser(token, pin: userPIN)
        let ref = try store.add(token: token, itemClass: .secretKey, attributes: [CKA.value: [42]], key: key)
        try store.changeUserPIN(token, old: userPIN, new: Array("new-user".utf8))
        #expect(throws: KeychainError.pinIncorrect(remaining: 9)) { _ = try store.unlockUser(token, pin: userPIN) }
        let k2 = try store.unlockUser(token, pin: Array("new-user".utf8))
        #expect(try store.item(ref, key: k2).attributes[CKA.value] == [42])
        try store.changeSOPIN(token, old: soPIN, new: Array("new-so".utf8))
        _ = try store.unlockSO(token, pin: Array("new-so".utf8))
        #expect(throws: KeychainError.self) { try store.changeUserPIN(token, old: wrong, new: [1]) }
        _ = try store.unlockUser(token, pin: Array("new-user".utf8))
    }

    @Test func uninitialisedUserPINAndReinit() throws {
        let home = TempHome()
        let store = try home.store()
        let token = TokenID("com.keyshare.soft:ABABABABABABABAB")!
        _ = try store.createToken(token, label: "T", soPIN: soPIN, userPIN: nil)
        #expect(throws: KeychainError.pinNotInitialized) { _ = try store.unlockUser(token, pin: userPIN) }
        let so = try store.unlockSO(token, pin: soPIN)
        try store.initUserPIN(token, soKey: so, newPIN: userPIN)
        let key = try store.unlockUser(token, pin: userPIN)
        let ref = try store.add(token: token, itemClass: .data, attributes: [CKA.label: [1]], key: key)
        try store.reinitializeToken(token, soPIN: soPIN, label: "Again")
        #expect(throws: KeychainError.itemNotFound) { _ = try store.item(ref, key: nil) }
        #expect(try store.token(token)?.label == "Again")
        #expect(try store.token(token)?.userPINInitialized == false)
        // A key from before the re-initialisation cannot set PINs any more.
        #expect(throws: KeychainError.self) { try store.initUserPIN(token, soKey: so, newPIN: userPIN) }
        #expect(throws: KeychainError.keyRequired) {
            _ = try store.add(token: token, itemClass: .data, attributes: [CKA.private: AttributeCoding.bool(true)], key: key)
        }
    }
}
