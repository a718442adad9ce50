import Foundation
import KeychainTestSupport
@testable import Keychain
import KeyshareCrypto
import Testing

/// Issue 17 in the store (docs/tpm.md): soft tokens sealed to a TPM, and TPM
/// tokens whose key only the TPM releases for the right PIN. Real swtpm per test.
@Suite(.serialized) struct TPMSealingTests {
    func tpm() throws -> SoftwareTPM { try #require(try SoftwareTPM.start(), "swtpm is not installed (make deps)") }

    @Test func boundTokenOpensOnlyWithItsTPM() throws {
        let home = TempHome()
        let store = try home.store()
        let sw = try tpm()
        try store.setConfiguredTCTI(sw.tcti)
        let id = TokenID("com.keyshare.soft:B0B0B0B0B0B0B0B0")!
        _ = try store.createToken(id, label: "bound", soPIN: soPIN, userPIN: userPIN, bindPCRs: [])
        #expect(try store.tokenBindingPCRs(id) == [])
        _ = try store.unlockUser(id, pin: userPIN)
        _ = try store.unlockSO(id, pin: soPIN)
        #expect(throws: KeychainError.pinIncorrect(remaining: 9)) { try store.unlockUser(id, pin: Array("wrong".utf8)) }

        // The same store on another machine's TPM: one clear error, no PIN counted.
        let other = try tpm()
        try store.setConfiguredTCTI(other.tcti)
        let failures = try store.token(id)?.userPINFailures
        let e = #expect(throws: KeychainError.self) { try store.unlockUser(id, pin: userPIN) }
        guard case .deviceBound(let m)? = e else { Issue.record("expected deviceBound, got \(String(describing: e))"); return }
        #expect(m.contains("another TPM"))
        #expect(try store.token(id)?.userPINFailures == failures)

        // Back on its own TPM; unbinding needs both PINs, then any TPM (or none) will do.
        try store.setConfiguredTCTI(sw.tcti)
        #expect(throws: KeychainError.self) { try store.setTokenBinding(id, soPIN: Array("bad-so".utf8), userPIN: userPIN, pcrs: nil) }
        try store.setTokenBinding(id, soPIN: soPIN, userPIN: userPIN, pcrs: nil)
        #expect(try store.tokenBindingPCRs(id) == nil)
        try store.setConfiguredTCTI(other.tcti)
        _ = try store.unlockUser(id, pin: userPIN)
    }

    @Test func pcrBoundTokenRefusesAfterExtend() throws {
        let home = TempHome()
        let store = try home.store()
        let sw = try tpm()
        try store.setConfiguredTCTI(sw.tcti)
        let id = TokenID("com.keyshare.soft:C0C0C0C0C0C0C0C0")!
        _ = try store.createToken(id, label: "pcr", soPIN: soPIN, userPIN: userPIN)
        try store.setTokenBinding(id, soPIN: soPIN, userPIN: userPIN, pcrs: [7])
        _ = try store.unlockUser(id, pin: userPIN)
        try store.changeUserPIN(id, old: userPIN, new: Array("new-pin-1".utf8))  // the new wrap is bound too
        _ = try store.unlockUser(id, pin: Array("new-pin-1".utf8))
        try TPMTestSupport.extend(sw.tcti, pcr: 7)
        let e = #expect(throws: KeychainError.self) { try store.unlockUser(id, pin: Array("new-pin-1".utf8)) }
        guard case .deviceBound(let m)? = e else { Issue.record("expected deviceBound"); return }
        #expect(m.contains("PCRs"))
    }

    /// A TPM token: the store holds no wrap a PIN could be tested against offline.
    @Test func tpmTokenKeyIsReleasedByTheTPM() throws {
        let home = TempHome()
        let store = try home.store()
        let sw = try tpm()
        try store.setConfiguredTCTI(sw.tcti)
        let id = TokenID("com.keyshare.tpm:00AA-11BB")!
        let rec = try store.createTPMToken(id, label: "tpm", soPIN: soPIN, userPIN: userPIN, serial: "11BB")
        #expect(store.isTPMToken(rec))
        let key = try store.unlockUser(id, pin: userPIN)
        #expect(throws: KeychainError.pinIncorrect(remaining: 9)) { try store.unlockUser(id, pin: Array("wrong".utf8)) }
        try store.changeUserPIN(id, old: userPIN, new: Array("other-pin".utf8))
        let again = try store.unlockUser(id, pin: Array("other-pin".utf8))
        #expect(try key.tpmObjectAuth() == again.tpmObjectAuth())
        // No TPM: the token cannot be opened, and says why.
        sw.stop()
        let e = #expect(throws: KeychainError.self) { try store.unlockUser(id, pin: Array("other-pin".utf8)) }
        guard case .tpmUnavailable? = e else { Issue.record("expected tpmUnavailable, got \(String(describing: e))"); return }
        #expect(try store.token(id)?.userPINFailures == 0)
    }
}
