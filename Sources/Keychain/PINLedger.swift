#if canImport(Glibc)
import Glibc
#endif
import KeyshareCrypto

/// Failed PIN attempts counted outside the store, for when the store cannot
/// be written (read-only mount, full disk): login must keep working there,
/// and PIN guessing must stay bounded (docs/reliability-findings.md, "Read-only mount and full disk").
///
/// One small file per (store file, token, role, PIN wrap) in
/// /dev/shm/keyshare-<euid>/ holding a decimal count, changed under flock.
/// /dev/shm is a tmpfs on Linux, independent of the disk the store is on,
/// so it is writable when the store's disk is not; the directory passes the
/// same ownership checks as the store (SecureDirectory). The name includes
/// the PIN wrap's salt, so a new store on a reused inode, or a PIN set anew,
/// starts with no attempts. A login on a writable store moves a ledger's
/// count into the store's own counter. The ledger is lost at reboot: while
/// a store stays unwritable, each boot allows at most the remaining
/// attempts again (documented as the limit of this design).
struct PINLedger {
    let path: String

    static var directory: String { "/dev/shm/keyshare-\(geteuid())" }

    init(store: KeychainStore, token: TokenID, role: TokenKey.Role, salt: [UInt8]) {
        var material = Array("keyshare PIN ledger\u{0}".utf8)
        for v in [store.fileIdentity.device, store.fileIdentity.inode] {
            withUnsafeBytes(of: v.littleEndian) { material += $0 }
        }
        material += Array(token.description.utf8) + [0, role == .user ? 1 : 2] + salt
        let digest = DigestAlgorithm.sha256.hash(material).prefix(16)
        path = Self.directory + "/pin-" + digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The attempts recorded; 0 when there is no ledger. Creates nothing.
    func pending() throws -> Int {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return 0 }
            throw failure("cannot read the PIN attempt ledger \(path)", errno)
        }
        defer { close(fd) }
        flock(fd, LOCK_SH)
        return try read(fd)
    }

    /// Records one more attempt unless `limit` are recorded already. Returns
    /// false at the limit; throws when the attempt cannot be recorded, and
    /// the caller must then refuse the login.
    func charge(limit: Int) throws -> Bool {
        try update { count in count < limit ? count + 1 : nil } != nil
    }

    /// Takes back `n` attempts (a correct PIN's own charge, or attempts moved
    /// into the store); the file goes at 0. Best effort: a count left high
    /// errs on the safe side.
    func release(_ n: Int) {
        _ = try? update { count in max(0, count - n) }
    }

    /// Applies `change` to the count under an exclusive lock; nil from
    /// `change` leaves the file alone. Returns the new count.
    private func update(_ change: (Int) -> Int?) throws -> Int? {
        let dir = Self.directory
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            throw failure("cannot create \(dir) to count the PIN attempt", errno)
        }
        try SecureDirectory.check(path: dir)
        let fd = try lockedFile()
        defer { close(fd) }
        let count = try read(fd)
        guard let next = change(count) else { return nil }
        if next == 0 {
            unlink(path)
            return 0
        }
        let text = Array(String(next).utf8)
        guard ftruncate(fd, 0) == 0, pwrite(fd, text, text.count, 0) == text.count, fsync(fd) == 0 else {
            throw failure("cannot write the PIN attempt ledger \(path)", errno)
        }
        return next
    }

    /// The ledger open and exclusively locked. A file removed (count back to
    /// 0) by another process while this one waited for the lock is not the
    /// ledger any more: open it again.
    private func lockedFile() throws -> Int32 {
        while true {
            let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw failure("cannot write the PIN attempt ledger \(path)", errno) }
            flock(fd, LOCK_EX)
            var held = stat(), named = stat()
            if fstat(fd, &held) == 0, held.st_nlink > 0, lstat(path, &named) == 0,
               held.st_dev == named.st_dev, held.st_ino == named.st_ino {
                do {
                    try SecureDirectory.checkFile(path: path)
                } catch {
                    close(fd)
                    throw error
                }
                return fd
            }
            close(fd)
        }
    }

    private func read(_ fd: Int32) throws -> Int {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = pread(fd, &buffer, buffer.count, 0)
        guard n >= 0 else { throw failure("cannot read the PIN attempt ledger \(path)", errno) }
        if n == 0 { return 0 }
        guard let count = Int(String(decoding: buffer[0..<n], as: UTF8.self)), count >= 0 else {
            throw KeychainError.storage("the PIN attempt ledger \(path) is damaged; remove it only if no one is guessing PINs")
        }
        return count
    }

    private func failure(_ what: String, _ code: Int32) -> KeychainError {
        let message = "\(what): \(String(cString: strerror(code)))"
        return code == ENOSPC || code == EDQUOT ? .storeFull(message) : .storage(message)
    }
}
