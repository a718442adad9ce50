import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// The agent's prompt as one client's runtime sees it (Prompt.swift,
/// docs/agent.md "The agent's prompt", "Consent"), with a scripted prompt in
/// place of the agent's pinentry.
struct PromptTests {
    /// Answers from a script; records the questions.
    final class Script: @unchecked Sendable {
        private let lock = Lock()
        var reachable = true
        var pins: [[UInt8]?] = []
        var consents: [ConsentAnswer] = []
        private(set) var pinQuestions: [PINQuestion] = []
        private(set) var consentQuestions: [ConsentQuestion] = []

        var prompt: ClientPrompt {
            ClientPrompt(available: { [self] in lock.withLock { reachable } },
                         pin: { [self] q in lock.withLock { pinQuestions.append(q); return pins.isEmpty ? nil : pins.removeFirst() } },
                         consent: { [self] q in
                             lock.withLock { consentQuestions.append(q); return consents.isEmpty ? .canceled : consents.removeFirst() }
                         })
        }
    }

    /// A runtime with the script's prompt on the fixture's store (the fixture made the token).
    private func prompted(_ f: Fixture, _ script: Script) throws -> Runtime {
        try Runtime(home: f.home, prompt: script.prompt)
    }

    @Test func noPromptNoProtectedPath() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let s = try f.rw(slot)
        #expect(try f.rt.tokenInfo(slot).flags & CKF_PROTECTED_AUTHENTICATION_PATH == 0)
        #expect(rv { try f.rt.login(session: s, userType: CKU_USER, pin: nil) } == CKR_ARGUMENTS_BAD)
        #expect(try #require(try f.rt.tokenRecord(slot: slot)).userPINFailures == 0)
    }

    @Test func nullPINComesFromThePrompt() throws {
        let f = try Fixture()
        let slot = try f.makeToken(label: "desk")
        let script = Script()
        let rt = try prompted(f, script)
        defer { rt.shutdown() }
        let s = try rt.openSession(slot: slot, flags: CKF_SERIAL_SESSION)
        #expect(try rt.tokenInfo(slot).flags & CKF_PROTECTED_AUTHENTICATION_PATH != 0)
        script.pins = [nil, Array("9999".utf8), userPIN]
        #expect(rv { try rt.login(session: s, userType: CKU_USER, pin: nil) } == CKR_FUNCTION_CANCELED)
        #expect(try #require(try rt.tokenRecord(slot: slot)).userPINFailures == 0)  // a cancel is not counted
        #expect(rv { try rt.login(session: s, userType: CKU_USER, pin: nil) } == CKR_PIN_INCORRECT)
        #expect(try #require(try rt.tokenRecord(slot: slot)).userPINFailures == 1)  // a wrong PIN is
        try rt.login(session: s, userType: CKU_USER, pin: nil)
        #expect(try rt.sessionInfo(s).state == CKS_RO_USER_FUNCTIONS)
        let asked = script.pinQuestions
        #expect(asked.count == 3 && asked.allSatisfy { $0.tokenLabel == "desk" && $0.kind == .user })
        #expect(asked.map(\.attemptsLeft) == [nil, nil, 9])
        // Already logged in: answered before any prompt.
        #expect(rv { try rt.login(session: s, userType: CKU_USER, pin: nil) } == CKR_USER_ALREADY_LOGGED_IN)
        #expect(script.pinQuestions.count == 3)
    }

    @Test func unreachableClientIsNotPrompted() throws {
        let f = try Fixture()
        let slot = try f.makeToken()
        let script = Script()
        script.reachable = false
        let rt = try prompted(f, script)
        defer { rt.shutdown() }
        let s = try rt.openSession(slot: slot, flags: CKF_SERIAL_SESSION)
        #expect(try rt.tokenInfo(slot).flags & CKF_PROTECTED_AUTHENTICATION_PATH == 0)
        #expect(rv { try rt.login(session: s, userType: CKU_USER, pin: nil) } == CKR_ARGUMENTS_BAD)
        #expect(script.pinQuestions.isEmpty)
        try rt.login(session: s, userType: CKU_USER, pin: userPIN)  // a PIN given works as ever
    }

    @Test func consentIsAskedOncePerKeyWhereTheTokenAsks() throws {
        let f = try Fixture()
        let slot = try f.makeToken(label: "desk")
        let script = Script()
        let rt = try prompted(f, script)
        defer { rt.shutdown() }
        let s = try rt.openSession(slot: slot, flags: CKF_SERIAL_SESSION | CKF_RW_SESSION)
        try rt.login(session: s, userType: CKU_USER, pin: userPIN)
        let gen = try Mechanism(type: CKM_EC_KEY_PAIR_GEN, parameter: nil)
        let (_, key) = try rt.generateKeyPair(session: s, mechanism: gen,
                                              publicTemplate: [Attribute(CKA_EC_PARAMS, ECCurve.p256.paramsDER)],
                                              privateTemplate: [.bool(CKA_SIGN, true), .bool(CKA_TOKEN, true),
                                                                Attribute(CKA_LABEL, Array("signer".utf8))])
        func sign() -> CK_RV {
            rv {
                try rt.signInit(session: s, mechanism: .ecdsaWith(.sha256), key: key)
                _ = try rt.sign(session: s, data: [1, 2, 3], capacity: 64)
            }
        }
        #expect(sign() == CKR_OK)  // consent off: no question
        #expect(script.consentQuestions.isEmpty)
        let id = try #require(try rt.tokenRecord(slot: slot)).tokenID
        try rt.store.setConsent(id, .ask)
        script.consents = [.rejected, .canceled, .allowed]
        #expect(sign() == CKR_FUNCTION_REJECTED)
        #expect(sign() == CKR_FUNCTION_CANCELED)
        #expect(sign() == CKR_OK)
        #expect(sign() == CKR_OK)  // allowed: not asked again by this runtime
        let asked = script.consentQuestions
        #expect(asked.count == 3 && asked.allSatisfy { $0.use == .sign && $0.keyLabel == "signer" && $0.tokenLabel == "desk" })
    }
}
