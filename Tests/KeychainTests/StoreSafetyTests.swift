import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto

/// Issue 12, items 6, 7, 8 and 11: a store someone else could have planted,
/// a store that cannot be written, an emptied store, a WAL deleted under a
/// running process. The real mounts, full disks and separate processes are
/// in Tests/integration/66-store-safety.sh; these are the store's own rules.
@Suite struct StoreSafetyTests {
    /// The error text a call fails with, or nil if it succeeds.
    func failure(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    var isRoot: Bool { geteuid() == 0 }

    /// Issue 26 review: the store's identity (the agent's store check, the
    /// PIN ledger) is the file SQLite opened, not whatever the path names a
    /// moment later. The hook swaps keychain.db right after the open, as a
    /// racing same-uid program would; before the fix, fileIdentity was the
    /// planted file's.
    @Test func fileIdentityIsTheOpenedFile() throws {
        let home = TempHome()
        _ = try home.store()
        let db = home.path + "/keychain.db"
        KeychainStore.testHookAfterOpen = { p in
            guard p == db else { return }
            rename(db, db + ".moved")
            let fd = open(db, O_CREAT | O_WRONLY | O_EXCL, 0o600)
            if fd >= 0 { close(fd) }
        }
        defer { KeychainStore.testHookAfterOpen = nil }
        let store = try home.store()
        var moved = stat(), planted = stat()
        #expect(stat(db + ".moved", &moved) == 0 && stat(db, &planted) == 0)
        #expect(store.fileIdentity.inode == UInt64(moved.st_ino), "bound to inode \(store.fileIdentity.inode), opened \(moved.st_ino), planted \(planted.st_ino)")
        #expect(store.fileIdentity.device == UInt64(moved.st_dev))
    }

    // MARK: item 6

    @Test func writableStoreDirectoryIsRefused() throws {
        let home = TempHome()
        _ = try home.store()
        chmod(home.path, 0o770)
        let msg = failure { _ = try home.store() }
        #expect(msg?.contains("refusing \(home.path): group-writable (mode 0770") == true, "\(msg ?? "opened")")
        #expect(msg?.contains("chmod go-w \(home.path)") == true)
        chmod(home.path, 0o757)
        #expect(failure { _ = try home.store() }?.contains("world-writable (mode 0757") == true)
        // Only readable by others: tightened, as before.
        chmod(home.path, 0o755)
        _ = try home.store()
        var st = stat()
        stat(home.path, &st)
        #expect(st.st_mode & 0o777 == 0o700)
    }

    @Test func writableStoreFilesAreRefused() throws {
        let home = TempHome()
        let store = try home.store()
        _ = try makeToken(store)
        for suffix in ["", "-wal", "-shm"] {
            let file = home.path + "/keychain.db" + suffix
            chmod(file, 0o666)
            let msg = failure { _ = try home.store() }
            #expect(msg?.hasPrefix("refusing \(file): group- and world-writable (mode 0666") == true, "\(suffix): \(msg ?? "opened")")
            chmod(file, 0o600)
        }
        // A planted rollback journal would be replayed: it is checked too.
        let journal = home.path + "/keychain.db-journal"
        #expect(FileManager.default.createFile(atPath: journal, contents: Data([1]), attributes: [.posixPermissions: 0o622]))
        #expect(failure { _ = try home.store() }?.contains("refusing \(journal): group- and world-writable") == true)
        unlink(journal)
        _ = try home.store()
    }

    @Test func anotherUsersStoreIsRefused() throws {
        guard isRoot else { return }  // chown needs root; `make test` runs as root
        let home = TempHome()
        let open = try home.store()  // keeps the -wal in place
        chown(home.path, 1000, 1000)
        let msg = failure { _ = try home.store() }
        #expect(msg?.hasPrefix("refusing \(home.path): owned by uid 1000") == true, "\(msg ?? "opened")")
        #expect(msg?.contains("not by this process's uid 0") == true)
        #expect(msg?.contains("mode 0700") == true)
        chown(home.path, 0, 0)
        for suffix in ["", "-wal"] {
            let file = home.path + "/keychain.db" + suffix
            chown(file, 1000, 0)
            #expect(failure { _ = try home.store() }?.hasPrefix("refusing \(file): owned by uid 1000") == true)
            chown(file, 0, 0)
        }
        _ = try home.store()
        _ = open
    }

    @Test func parentChainIsChecked() throws {
        let home = TempHome()
        let parent = (home.path as NSString).deletingLastPathComponent
        _ = try home.store()
        // A group-writable parent lets others rename the store away and plant their own.
        chmod(parent, 0o775)
        let msg = failure { _ = try home.store() }
        #expect(msg?.hasPrefix("refusing \(home.path): its parent \(parent) is group-writable (mode 0775") == true, "\(msg ?? "opened")")
        // Sticky, like /tmp: nobody else can rename the entries, so it is accepted.
        chmod(parent, 0o1777)
        _ = try home.store()
        chmod(parent, 0o700)
        if isRoot {
            chown(parent, 1000, 1000)
            #expect(failure { _ = try home.store() }?.contains("its parent \(parent) is owned by uid 1000") == true)
            chown(parent, 0, 0)
        }
    }

    @Test func symlinkedStoreFileIsRefusedButLinkedDirectoryIsResolved() throws {
        let home = TempHome()
        _ = try home.store()
        let db = home.path + "/keychain.db"
        rename(db, db + ".real")
        symlink(db + ".real", db)
        #expect(failure { _ = try home.store() }?.hasPrefix("refusing \(db): a symbolic link") == true)
        unlink(db)
        rename(db + ".real", db)
        let link = home.path + ".link"
        symlink(home.path, link)
        let store = try KeychainStore(home: link, kdfLog2N: 10)
        #expect(store.path == home.path + "/keychain.db")
    }

    @Test func secureDirectoryIsReusable() throws {
        let home = TempHome()
        _ = try home.store()
        try SecureDirectory.check(path: home.path)
        #expect(throws: KeychainError.self) { try SecureDirectory.check(path: "/tmp") }  // 1777 as the leaf
        #expect(throws: KeychainError.self) { try SecureDirectory.check(path: home.path + "/keychain.db") }
    }

    // MARK: item 8

    @Test func emptyStoreFileIsAnErrorNotANewStore() throws {
        let home = TempHome()
        let store = try home.store()
        _ = try makeToken(store)
        try store.checkpoint()
        truncate(home.path + "/keychain.db", 0)
        let msg = failure { _ = try home.store() }
        #expect(msg?.contains("\(home.path)/keychain.db is empty (0 bytes)") == true, "\(msg ?? "opened as a new store")")
        var st = stat()
        stat(home.path + "/keychain.db", &st)
        #expect(st.st_size == 0, "nothing written into the emptied file")
    }

    @Test func truncatedStoreNamesTheFile() throws {
        let home = TempHome()
        let store = try home.store()
        _ = try makeToken(store)
        try store.checkpoint()
        truncate(home.path + "/keychain.db", 50)
        let msg = failure { _ = try home.store().tokens() }
        #expect(msg?.contains("\(home.path)/keychain.db") == true, "\(msg ?? "opened")")
    }

    @Test func newStoreIsBornComplete() throws {
        let home = TempHome()
        _ = try home.store()
        var st = stat()
        stat(home.path + "/keychain.db", &st)
        #expect(st.st_size > 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: home.path).filter { $0.hasPrefix(".keychain.db.new") }
        #expect(leftovers.isEmpty)
    }

    @Test func orphanWALIsNotAdoptedByANewStore() throws {
        let home = TempHome()
        let store = try home.store()
        _ = try makeToken(store)
        let wal = Array(FileManager.default.contents(atPath: home.path + "/keychain.db-wal") ?? Data())
        #expect(!wal.isEmpty)
        unlink(home.path + "/keychain.db")
        let msg = failure { _ = try home.store() }
        #expect(msg?.contains("keychain.db is missing but its write-ahead log") == true, "\(msg ?? "opened")")
        _ = store
    }

    // MARK: item 7

    @Test func readOnlyHandleReadsAndRefusesWrites() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let ref = try store.add(token: token, itemClass: .certificate,
                                attributes: .certLike(label: "c", id: [1], value: [1, 2, 3]), key: nil)
        let ro = try KeychainStore(home: home.path, kdfLog2N: 10, readOnly: true)
        #expect(ro.readOnly == .requested)
        #expect(try ro.tokens().count == 1)
        #expect(try ro.item(ref, key: nil).attributes[CKA.label] == Array("c".utf8))
        let msg = failure { _ = try ro.add(token: token, itemClass: .certificate, attributes: .certLike(label: "d", id: [2], value: [1]), key: nil) }
        #expect(msg?.hasPrefix("read-only store:") == true, "\(msg ?? "written")")
        #expect(throws: KeychainError.self) { try ro.checkpoint() }
        // A change by a writer is seen.
        try store.update(ref, attributes: [CKA.label: Array("e".utf8)], key: nil)
        #expect(try ro.item(ref, key: nil).attributes[CKA.label] == Array("e".utf8))
    }

    @Test func readOnlyLoginIsCountedOutsideTheStore() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store, maxAttempts: 5)
        let ro = try KeychainStore(home: home.path, kdfLog2N: 10, readOnly: true)
        // The correct PIN logs in and leaves no count behind.
        _ = try ro.unlockUser(token, pin: userPIN)
        _ = try ro.unlockUser(token, pin: userPIN)
        // Wrong PINs are counted: 5 allowed, then locked even for the right PIN.
        for left in stride(from: 4, through: 0, by: -1) {
            #expect(throws: KeychainError.pinIncorrect(remaining: left)) { try ro.unlockUser(token, pin: Array("wrong".utf8)) }
        }
        #expect(throws: KeychainError.pinLocked) { try ro.unlockUser(token, pin: userPIN) }
        // Another handle (another process) sees the same count.
        let ro2 = try KeychainStore(home: home.path, kdfLog2N: 10, readOnly: true)
        #expect(throws: KeychainError.pinLocked) { try ro2.unlockUser(token, pin: userPIN) }
        // Once writable, the count moves into the store: the token is locked there.
        #expect(throws: KeychainError.pinLocked) { try store.unlockUser(token, pin: userPIN) }
        #expect(try store.token(token)?.userPINLocked == true)
        // The SO unlocks as usual.
        let so = try store.unlockSO(token, pin: soPIN)
        try store.initUserPIN(token, soKey: so, newPIN: userPIN)
        _ = try ro.unlockUser(token, pin: userPIN)
    }

    @Test func readOnlyFailuresJoinTheStoreCounter() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        let ro = try KeychainStore(home: home.path, kdfLog2N: 10, readOnly: true)
        for _ in 0..<3 { _ = failure { _ = try ro.unlockUser(token, pin: Array("wrong".utf8)) } }
        #expect(throws: KeychainError.pinIncorrect(remaining: 6)) { try store.unlockUser(token, pin: Array("wrong".utf8)) }
        #expect(try store.token(token)?.userPINFailures == 4)
        // Moved, not copied: the read-only handle now counts from the store's 4.
        #expect(throws: KeychainError.pinIncorrect(remaining: 5)) { try ro.unlockUser(token, pin: Array("wrong".utf8)) }
        _ = try store.unlockUser(token, pin: userPIN)
        #expect(try store.token(token)?.userPINFailures == 0)
    }

    // MARK: item 11

    @Test func commitIsRefusedOnceTheWALIsDeleted() throws {
        let home = TempHome()
        let store = try home.store()
        let token = try makeToken(store)
        unlink(home.path + "/keychain.db-wal")
        unlink(home.path + "/keychain.db-shm")
        let msg = failure { _ = try store.add(token: token, itemClass: .certificate, attributes: .certLike(label: "lost", id: [1], value: [1]), key: nil) }
        #expect(msg?.contains("keychain.db-wal was deleted while this process had the store open") == true, "\(msg ?? "acknowledged")")
        #expect(throws: KeychainError.self) { try store.checkpoint() }
        #expect(try store.find(ItemQuery(attributes: [CKA.label: Array("lost".utf8)]), key: nil).isEmpty, "rolled back")
    }
}
