import CPKCS11
import Keychain

/// The agent's cross-process login (`keyshare unlock --for 30m --program P`,
/// docs/agent.md "Unlock across processes"): while a token is unlocked, the
/// applications the unlock names (and the policy lets see it; never one that
/// authenticates a person: the agent decides, KeyshareAgent/UnlockScope.swift)
/// are logged in as the user without calling C_Login, the way a macOS
/// keychain unlocked at login serves its applications.
///
/// What an application sees while the token is unlocked:
/// - C_GetSessionInfo: CKS_RO/RW_USER_FUNCTIONS; private objects are found and used.
/// - C_GetTokenInfo: no CKF_LOGIN_REQUIRED, so hosts that log in whenever the
///   flag is set (pkcs11-tool -s prompts for the PIN) use the token as is.
/// - C_Login(CKU_USER): the PIN is checked (and a wrong one counted, with
///   CKR_PIN_INCORRECT and the shared login kept); a right one makes the login
///   the application's own (CKR_OK), which lock and expiry no longer end.
///   Chosen over CKR_USER_ALREADY_LOGGED_IN, the answer for a second C_Login
///   of the same application, because applications that always log in
///   (pkcs11-tool --login aborts on 0x100) must keep working while a token
///   is unlocked, as applications that unlock an unlocked macOS keychain do.
///   CKU_SO: CKR_USER_ANOTHER_ALREADY_LOGGED_IN (C_Logout first).
/// - C_Logout: ends the shared login for this application only, until the
///   next `keyshare unlock`; other applications stay unlocked.
/// - `keyshare lock` or the expiry: every application's shared login ends at
///   once (the agent applies the change to every client, not at its next call):
///   handles of private objects become invalid and operations end, as at C_Logout.
/// An application's own C_Login is never touched by the shared state.
public struct SharedUnlock: Sendable {
    public let key: TokenKey
    public let generation: UInt64
    public init(key: TokenKey, generation: UInt64) {
        self.key = key
        self.generation = generation
    }
}

extension Module {
    /// Brings this client's logins in line with the agent's unlocked tokens
    /// (already narrowed to the tokens the client may see). A no-op before
    /// C_Initialize.
    ///
    /// `snapshot` orders the tables: the agent numbers each table it computes
    /// (under the lock its table changes take), and a table older than one
    /// already applied is dropped. A connection thread's table computed just
    /// before `keyshare lock` or the expiry sweep therefore cannot re-add the
    /// login the sweep has just removed (issue 26, review: the key stayed in
    /// memory until the client's next call). nil: apply unconditionally
    /// (in-process tests).
    public func applySharedUnlocks(_ unlocked: [TokenID: SharedUnlock], snapshot: UInt64? = nil) {
        guard let rt = try? runtime() else { return }
        rt.applySharedUnlocks(unlocked, snapshot: snapshot)
    }
}

extension Runtime {
    func applySharedUnlocks(_ unlocked: [TokenID: SharedUnlock], snapshot: UInt64? = nil) {
        let ended = lock.withLock { () -> [(TokenID, [Session])] in
            var ended: [(TokenID, [Session])] = []
            if let snapshot {
                guard snapshot > sharedSnapshot else { return ended }  // a newer table is in place
                sharedSnapshot = snapshot
            }
            for (token, login) in logins {
                guard let generation = login.shared, unlocked[token]?.generation != generation else { continue }
                logins[token] = nil
                objects.forgetPrivate(token: token)
                ended.append((token, sessions.values.filter { $0.tokenID == token }))
            }
            for (token, u) in unlocked where logins[token] == nil && declinedShared[token] != u.generation && !hidden(token) {
                logins[token] = LoginState(role: .user, key: u.key, shared: u.generation)
                objects.loggedIn(token: token)
            }
            return ended
        }
        for (token, sessions) in ended {
            for s in sessions { s.endAll() }
            savedStates.forget(token: token)
        }
    }
}
