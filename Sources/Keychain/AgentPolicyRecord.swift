/// The agent's per-application policy (`keyshare policy`, docs/agent.md
/// "Policy"), kept in the store's `meta` table: it is written in one SQLite
/// transaction (atomic), it lives under the store's own SecureDirectory and
/// file checks (a planted or symlinked keychain.db is refused before anything
/// is read), and it travels with the store it governs, whatever path names it.
/// The bytes are the agent's encoding (KeyshareAgent.AgentPolicy); this layer
/// only keeps them.
extension KeychainStore {
    static let agentPolicyKey = "agent-policy"

    /// nil: no policy was ever written (the agent's default: allow all).
    public func agentPolicyData() throws -> [UInt8]? {
        try read {
            try db.query("SELECT value FROM meta WHERE key = ?", [.text(Self.agentPolicyKey)]) { $0.blob(0) }.first
        }
    }

    /// Replaces the policy (nil removes it).
    public func setAgentPolicyData(_ bytes: [UInt8]?) throws {
        try write {
            if let bytes {
                try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text(Self.agentPolicyKey), .blob(bytes)])
            } else {
                try db.run("DELETE FROM meta WHERE key = ?", [.text(Self.agentPolicyKey)])
            }
        }
    }
}
