#if canImport(Glibc)
import Glibc
#endif
import AgentProtocol
import CLinux

/// The agent's control requests (docs/agent.md, "Control requests"): what the
/// `keyshare` CLI asks of the agent (unlock, lock, and every operation on a
/// private key), on the agent's socket beside the PKCS #11 calls but with a
/// magic of its own, so the PKCS #11 codec is not involved. One request per
/// connection:
///
///   request: u32 magic "KSC1", u16 version, u16 op, u32 n, n x (u32 len name, name, u32 len value, value)
///   reply:   u32 magic "KSC1", u16 version, u16 status (0 ok, 1 refused), then fields as above
///
/// A refused reply carries one field "error": one line for the CLI's stderr,
/// never a PIN or key. Frames are the agent's (u32 length, <= 16 MiB); the
/// request buffer (it may hold a PIN) is wiped after use on both sides.
public enum ControlProtocol {
    public static let magic: UInt32 = 0x3143_534b  // "KSC1" little-endian
    public static let version: UInt16 = 1

    public enum Op: UInt16, Sendable {
        case unlock = 1, lock, status, resolveToken, sign, decrypt, export, csr, generate, share
        /// ML-KEM decapsulation with a key in the token (issue 18): the reply's "result" is the shared secret.
        case decapsulate
    }

    public struct Message: Sendable {
        public var fields: [String: [UInt8]] = [:]
        public init(_ fields: [String: [UInt8]] = [:]) { self.fields = fields }
        public subscript(_ name: String) -> [UInt8]? {
            get { fields[name] }
            set { fields[name] = newValue }
        }
        public func string(_ name: String) -> String? { fields[name].map { String(decoding: $0, as: UTF8.self) } }
        public mutating func set(_ name: String, _ s: String?) { fields[name] = s.map { Array($0.utf8) } }
    }

    /// Encodes a frame payload: header (op or status) then the fields.
    static func encode(_ head: UInt16, _ m: Message, into b: inout ksa_buf) {
        ksa_put_u32(&b, magic)
        ksa_put_u16(&b, version)
        ksa_put_u16(&b, head)
        ksa_put_u32(&b, UInt32(m.fields.count))
        for (k, v) in m.fields.sorted(by: { $0.key < $1.key }) {
            let key = Array(k.utf8)
            ksa_put_u32(&b, UInt32(key.count))
            key.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, $0.count) }
            ksa_put_u32(&b, UInt32(v.count))
            v.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, $0.count) }
        }
    }

    /// Decodes a payload; nil when malformed (wrong magic, version, truncated, too many fields).
    static func decode(_ b: ksa_buf) -> (head: UInt16, message: Message)? {
        var r = ksa_rd(p: b.data, left: b.len, failed: 0)
        guard ksa_get_u32(&r) == magic, ksa_get_u16(&r) == version else { return nil }
        let head = ksa_get_u16(&r)
        let n = ksa_get_u32(&r)
        guard r.failed == 0, n <= 64 else { return nil }
        var m = Message()
        for _ in 0..<n {
            let kl = Int(ksa_get_u32(&r))
            guard r.failed == 0, kl <= 64, let kp = ksa_get_raw(&r, kl) else { return nil }
            let key = String(decoding: UnsafeBufferPointer(start: kp, count: kl), as: UTF8.self)
            let vl = Int(ksa_get_u32(&r))
            guard r.failed == 0, let vp = vl == 0 ? UnsafePointer<UInt8>(bitPattern: 1) : ksa_get_raw(&r, vl) else { return nil }
            m[key] = vl == 0 ? [] : Array(UnsafeBufferPointer(start: vp, count: vl))
        }
        guard r.failed == 0, r.left == 0 else { return nil }
        return (head, m)
    }

    /// Whether a first frame is a control request (and not a module hello).
    static func isControl(_ b: ksa_buf) -> Bool {
        var r = ksa_rd(p: b.data, left: b.len, failed: 0)
        return ksa_get_u32(&r) == magic && r.failed == 0
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ s: String) { description = s }
    }

    /// The CLI's side: connects to the agent (starting it as the module does:
    /// `program agent --daemonize` under DIR/start.lock), sends one request,
    /// returns the reply's fields or throws its error line.
    /// `hiddenFromAgent`: environment variables an agent this call starts must
    /// not inherit (the CLI's `env:VAR` secret sources: the agent outlives the
    /// command, and its environment is readable by root).
    public static func call(_ op: Op, _ request: Message, program: String, hiddenFromAgent: Set<String> = []) throws -> Message {
        let fd = try connect(program: program, hiddenFromAgent: hiddenFromAgent)
        defer { close(fd) }
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }  // zeroes: the request may hold a PIN
        encode(op.rawValue, request, into: &b)
        guard b.failed == 0, ksa_write_frame(fd, b.data, b.len) == 0 else {
            throw Failure("cannot send the request to the keyshare agent: \(String(cString: strerror(errno)))")
        }
        ksa_buf_reset(&b)
        guard ksa_read_frame(fd, &b) == 0, let (status, reply) = decode(b) else {
            throw Failure("the keyshare agent closed the connection without an answer (see its log)")
        }
        guard status == 0 else { throw Failure(reply.string("error") ?? "the keyshare agent refused the request") }
        return reply
    }

    static func connect(program: String, hiddenFromAgent: Set<String>) throws -> Int32 {
        var dirBuf = [CChar](repeating: 0, count: 512)
        var pathBuf = [CChar](repeating: 0, count: 128)
        guard ksa_agent_dir(&dirBuf, dirBuf.count) == 0, ksa_socket_path(&pathBuf, pathBuf.count) == 0 else {
            throw Failure("the keyshare agent's socket path is too long")
        }
        let dir = Agent.string(dirBuf), path = Agent.string(pathBuf)
        if let fd = tryConnect(path) { return fd }
        if let v = getenv("KEYSHARE_AGENT_NO_START"), String(cString: v) == "1" {
            throw Failure("the keyshare agent is not running and KEYSHARE_AGENT_NO_START=1 forbids starting it")
        }
        guard ksa_prepare_dir(dir, 1) == 0 else {
            throw Failure("refusing \(dir): it must be a directory owned by uid \(getuid()) with mode 0700")
        }
        let lock = open(dir + "/start.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { throw Failure("cannot open \(dir)/start.lock: \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        _ = flock(lock, LOCK_EX)
        if let fd = tryConnect(path) { return fd }
        // The first process exits once the agent listens (AgentCommand --daemonize).
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup(program), strdup("agent"), strdup("--daemonize"), nil]
        defer { for p in argv { free(p) } }
        var env: [UnsafeMutablePointer<CChar>?] = []
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            let name = s.split(separator: "=", maxSplits: 1).first.map(String.init) ?? s
            if !hiddenFromAgent.contains(name) { env.append(strdup(entry)) }
            p += 1
        }
        env.append(nil)
        defer { for e in env { free(e) } }
        guard posix_spawn(&pid, program, nil, nil, &argv, &env) == 0 else {
            throw Failure("cannot start the keyshare agent (\(program))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if let fd = tryConnect(path) { return fd }
        throw Failure("the keyshare agent did not start (see \(dir)/agent.log)")
    }

    static func tryConnect(_ path: String) -> Int32? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8).prefix(raw.count - 1))
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc == 0 { return fd }
        close(fd)
        return nil
    }
}
