#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

let soPIN: [UInt8] = Array("1234".utf8)
let userPIN: [UInt8] = Array("0000".utf8)

/// A private store and its own Runtime, so tests that do not touch the
/// process-wide Module can run in parallel.
final class Fixture {
    let home: String
    let rt: Runtime

    init() throws {
        setenv("KEYSHARE_KDF_LOG2N", "10", 1)
        home = makeTempDir()
        rt = try Runtime(home: home)
    }

    deinit {
        rt.shutdown()
        removeFlatDir(home)
    }

    /// A soft token made through C_InitToken on the free slot, with the user
    /// PIN set by the SO when `withUserPIN`.
    func makeToken(label: String = "t", withUserPIN: Bool = true) throws -> CK_SLOT_ID {
        let rec = try rt.initToken(slot: freeSlotID, soPIN: soPIN, label: label)
        let slot = CK_SLOT_ID(rec.slotID)
        if withUserPIN {
            let s = try rt.openSession(slot: slot, flags: CKF_SERIAL_SESSION | CKF_RW_SESSION)
            try rt.login(session: s, userType: CKU_SO, pin: soPIN)
            try rt.initPIN(session: s, pin: userPIN)
            try rt.closeSession(s)
        }
        return slot
    }

    func rw(_ slot: CK_SLOT_ID) throws -> CK_SESSION_HANDLE {
        try rt.openSession(slot: slot, flags: CKF_SERIAL_SESSION | CKF_RW_SESSION)
    }

    func ro(_ slot: CK_SLOT_ID) throws -> CK_SESSION_HANDLE {
        try rt.openSession(slot: slot, flags: CKF_SERIAL_SESSION)
    }
}

/// A fixture with a token (Fixture.makeToken) and a new R/W session on it where the user is
/// logged in: where most suites start.
func loggedIn() throws -> (Fixture, CK_SESSION_HANDLE) {
    let f = try Fixture()
    let slot = try f.makeToken()
    let s = try f.rw(slot)
    try f.rt.login(session: s, userType: CKU_USER, pin: userPIN)
    return (f, s)
}

func makeTempDir() -> String {
    var template = Array("/tmp/keyshare-p11-test.XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { buf in
        guard let base = buf.baseAddress, let p = mkdtemp(base) else { return "/tmp" }
        return String(cString: p)
    }
}

/// The store directory holds only files (db, WAL, SHM).
func removeFlatDir(_ path: String) {
    guard path != "/tmp", let d = opendir(path) else { return }
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != ".", name != ".." { unlink(path + "/" + name) }
    }
    closedir(d)
    rmdir(path)
}

/// The CK_RV a throwing call fails with, or CKR_OK.
func rv(_ body: () throws -> Void) -> CK_RV {
    do {
        try body()
        return CKR_OK
    } catch {
        return returnValue(for: error)
    }
}

func ulong(_ v: CK_ULONG) -> [UInt8] { AttributeCoding.ulong(v) }
func bool(_ v: Bool) -> [UInt8] { AttributeCoding.bool(v) }
