#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
@testable import PKCS11
import Testing

/// These share the process-wide Module, so they run one at a time.
@Suite(.serialized) struct ModuleStateTests {
    @Test func initializeFinalizeRules() throws {
        let home = makeTempDir()
        defer { removeFlatDir(home) }
        let m = Module.shared
        #expect(rv { try m.finalize() } == CKR_CRYPTOKI_NOT_INITIALIZED)
        #expect(rv { _ = try m.runtime() } == CKR_CRYPTOKI_NOT_INITIALIZED)
        #expect(rv { try m.initialize(InitializeArguments(reservedIsNull: false), home: home) } == CKR_ARGUMENTS_BAD)
        #expect(rv { try m.initialize(InitializeArguments(mutexCallbackCount: 2), home: home) } == CKR_ARGUMENTS_BAD)
        #expect(!m.isInitialized)

        try m.initialize(InitializeArguments(flags: CKF_OS_LOCKING_OK), home: home)
        #expect(m.isInitialized)
        #expect(rv { try m.initialize(nil, home: home) } == CKR_CRYPTOKI_ALREADY_INITIALIZED)
        #expect(rv { try m.finalize(reservedIsNull: false) } == CKR_ARGUMENTS_BAD)
        try m.finalize()
        #expect(rv { _ = try m.runtime() } == CKR_CRYPTOKI_NOT_INITIALIZED)

        // Application mutex callbacks are accepted (the module uses its own locks).
        try m.initialize(InitializeArguments(mutexCallbackCount: 4), home: home)
        try m.finalize()
    }

    @Test func finalizeEndsSessionsButInFlightRuntimeStaysSafe() throws {
        setenvKDF()
        let home = makeTempDir()
        defer { removeFlatDir(home) }
        try Module.shared.initialize(nil, home: home)
        // No store yet: C_InitToken on the free slot creates it (ks_C_InitToken does this).
        let rt = try Module.shared.runtimeCreatingStore()
        let rec = try rt.initToken(slot: freeSlotID, soPIN: soPIN, label: "f")
        let s = try rt.openSession(slot: CK_SLOT_ID(rec.slotID), flags: CKF_SERIAL_SESSION)
        try Module.shared.finalize()
        // A call that already holds the old runtime finishes without crashing.
        #expect(rv { _ = try rt.sessionInfo(s) } == CKR_SESSION_HANDLE_INVALID)
        // Re-initialisation gives a fresh state over the same store.
        try Module.shared.initialize(nil, home: home)
        let rt2 = try Module.shared.runtime()
        #expect(try rt2.slotList(tokenPresent: true).contains(CK_SLOT_ID(rec.slotID)))
        try Module.shared.finalize()
    }
}

func setenvKDF() { setenv("KEYSHARE_KDF_LOG2N", "10", 1) }
