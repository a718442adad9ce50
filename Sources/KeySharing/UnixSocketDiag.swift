#if canImport(Glibc)
import Glibc
#endif
import CLinux
import KeyshareCrypto

/// The peer of a Unix-domain socket, from the kernel's sock_diag netlink
/// interface (what `ss -x` shows): no privilege needed for one's own sockets.
///
/// sock_diag finds a socket only from the network namespace it lives in, and
/// the kernel makes the server's end of a connection in the CLIENT's namespace
/// (the connecting socket's). So a client under `unshare -n`, `ip netns exec`,
/// systemd's PrivateNetwork=, firejail --net=none or bwrap --unshare-net (or
/// every client, when the agent itself was started in such a namespace) is
/// looked up from its own namespace (issue 26, defect 8): the agent's first,
/// where nearly every client is; otherwise the namespace the socket lives in
/// (SIOCGSKNS, or the client's /proc/PID/ns/net when the kernel will not say),
/// through a netlink socket made in it (CLinux keyshare_sock_diag_in_netns),
/// kept for the next client of that namespace.
enum UnixSocketDiag {
    enum Peer: Equatable {
        /// The inode of the socket at the other end.
        case inode(UInt64)
        /// The socket or its peer is not found: the caller cannot be checked (refused).
        case unknown(String)
        /// The socket lives in a network namespace this process may not enter
        /// (EPERM: a root-made one, for an agent that is not root): why.
        case unreachable(String)
    }

    /// The inode of the socket at the other end of `fd` (in this process's
    /// network namespace), or nil.
    static func peerInode(ofSocket fd: Int32) -> UInt64? {
        if case .inode(let peer) = peer(of: fd, pid: nil) { return peer }
        return nil
    }

    /// The peer of `connection`, our end of a connection made by `pid`.
    static func peer(of connection: Int32, pid: Int32?) -> Peer {
        var st = stat()
        guard fstat(connection, &st) == 0 else { return .unknown("fstat: \(String(cString: strerror(errno)))") }
        let inode = UInt32(truncatingIfNeeded: st.st_ino)
        let own = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), KEYSHARE_NETLINK_SOCK_DIAG)
        guard own >= 0 else { return .unknown("no sock_diag socket: \(String(cString: strerror(errno)))") }
        let here = query(own, inode: inode, seq: 1)
        close(own)
        switch here {
        case .peer(let p): return .inode(p)
        case .failed(let why): return .unknown(why)
        case .absent: break
        }
        // Not in our namespace: in the one the socket lives in.
        var ns = keyshare_socket_netns(connection)
        var how = "SIOCGSKNS"
        if ns < 0, let pid {
            ns = open("/proc/\(pid)/ns/net", O_RDONLY | O_CLOEXEC)
            how = "/proc/\(pid)/ns/net"
        }
        guard ns >= 0 else {
            return .unknown("the connection is not in this network namespace and its own cannot be named")
        }
        defer { close(ns) }
        var nsStat = stat()
        guard fstat(ns, &nsStat) == 0 else { return .unknown("fstat of a network namespace failed") }
        let nsInode = UInt64(nsStat.st_ino)
        if nsInode == ownNamespace {
            return .unknown("the connection is not found in its network namespace (net:[\(nsInode)], from \(how))")
        }
        switch NamespaceSockets.shared.query(namespace: ns, inode: nsInode, socket: inode) {
        case .success(.peer(let p)): return .inode(p)
        case .success(.absent): return .unknown("the connection is not found in its network namespace (net:[\(nsInode)], from \(how))")
        case .success(.failed(let why)): return .unknown(why)
        case .failure(let error) where error.code == EPERM:
            return .unreachable("its network namespace net:[\(nsInode)] cannot be entered (\(error))")
        case .failure(let error):
            // Not a matter of permission (no process, a timeout): refused, never a weaker check.
            return .unknown("a netlink socket in the network namespace net:[\(nsInode)]: \(error)")
        }
    }

    /// This process's network namespace (the agent never changes it).
    static let ownNamespace: UInt64 = {
        var st = stat()
        return stat("/proc/self/ns/net", &st) == 0 ? UInt64(st.st_ino) : 0
    }()

    enum Answer {
        case peer(UInt64)
        case absent
        case failed(String)
    }

    /// One SOCK_DIAG_BY_FAMILY request for the Unix socket `inode` on the
    /// netlink socket `nl`, with its peer. Replies to an earlier request that
    /// timed out (other sequence numbers) are skipped.
    static func query(_ nl: Int32, inode: UInt32, seq: UInt32) -> Answer {
        let sockDiagByFamily: UInt16 = 20, nlmsgError: UInt16 = 2
        let nlmFRequest: UInt16 = 1, udiagShowPeer: UInt32 = 4, unixDiagPeer: UInt16 = 2
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        // nlmsghdr (16 bytes) + unix_diag_req (24 bytes), native byte order.
        var msg: [UInt8] = []
        func put<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v) { msg += $0 } }
        put(UInt32(40)); put(sockDiagByFamily); put(nlmFRequest); put(seq); put(UInt32(0))
        put(UInt8(AF_UNIX)); put(UInt8(0)); put(UInt16(0))
        put(UInt32.max)                    // udiag_states: any
        put(inode)
        put(udiagShowPeer)
        put(UInt32.max); put(UInt32.max)   // no cookie
        guard msg.withUnsafeBytes({ send(nl, $0.baseAddress, $0.count, 0) }) == msg.count else {
            return .failed("sock_diag: send: \(String(cString: strerror(errno)))")
        }
        var reply = [UInt8](repeating: 0, count: 8192)
        for _ in 0..<8 {
            let n = reply.withUnsafeMutableBytes { recv(nl, $0.baseAddress, $0.count, 0) }
            guard n >= 16 else { return .failed("sock_diag does not answer") }
            func u16(_ at: Int) -> UInt16 { reply.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt16.self) } }
            func u32(_ at: Int) -> UInt32 { reply.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt32.self) } }
            guard u32(8) == seq else { continue }
            let length = min(Int(u32(0)), n)
            if u16(4) == nlmsgError, length >= 20 {
                let error = Int32(bitPattern: u32(16))
                return error == -ENOENT ? .absent : .failed("sock_diag: \(String(cString: strerror(-error)))")
            }
            guard u16(4) == sockDiagByFamily, length >= 32, u32(16 + 4) == inode else {
                return .failed("sock_diag answered another question")
            }
            // unix_diag_msg is 16 bytes; then rtattrs, 4-byte aligned.
            var at = 16 + 16
            while at + 4 <= length {
                let len = Int(u16(at)), type = u16(at + 2)
                guard len >= 4, at + len <= length else { break }
                if type == unixDiagPeer, len >= 8 { return .peer(UInt64(u32(at + 4))) }
                at += (len + 3) & ~3
            }
            return .failed("the connection has no peer (the caller closed it)")
        }
        return .failed("sock_diag does not answer")
    }
}

/// Netlink sockets made in other network namespaces, by namespace inode: a
/// few, each closed after a minute unused (checked at each lookup), so a busy
/// namespace costs one fork, not one per client. A cached socket keeps its
/// namespace alive (and its inode number unique) while it is kept.
final class NamespaceSockets: @unchecked Sendable {
    static let shared = NamespaceSockets()
    static let capacity = 8
    static let idleSeconds = 60.0
    static let enterTimeoutMilliseconds: Int32 = 2000

    private let lock = Lock()
    private var sockets: [UInt64: (fd: Int32, used: Double)] = [:]
    private var seq: UInt32 = 1

    /// The answer for `socket` from the namespace `namespace` (inode `inode`),
    /// or why the namespace cannot be entered.
    func query(namespace: Int32, inode: UInt64, socket: UInt32) -> Result<UnixSocketDiag.Answer, Failure> {
        lock.withLock {
            let now = Self.now()
            for (ino, s) in sockets where now - s.used > Self.idleSeconds {
                close(s.fd)
                sockets[ino] = nil
            }
            let nl: Int32
            if let s = sockets[inode] {
                nl = s.fd
            } else {
                let fd = keyshare_sock_diag_in_netns(namespace, Self.enterTimeoutMilliseconds)
                guard fd >= 0 else { return .failure(Failure(code: -fd)) }
                if sockets.count >= Self.capacity, let oldest = sockets.min(by: { $0.value.used < $1.value.used }) {
                    close(oldest.value.fd)
                    sockets[oldest.key] = nil
                }
                nl = fd
            }
            sockets[inode] = (nl, now)
            seq &+= 1
            let answer = UnixSocketDiag.query(nl, inode: socket, seq: seq)
            if case .failed = answer {
                // A socket that failed once is not trusted with the next question.
                close(nl)
                sockets[inode] = nil
            }
            return .success(answer)
        }
    }

    /// keyshare_sock_diag_in_netns's errno.
    struct Failure: Error, CustomStringConvertible {
        let code: Int32
        var description: String { String(cString: strerror(code)) }
    }

    private static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
