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
        /// `keyshare agent status` / `stop` (docs/agent.md, "Managing the agent").
        case agentStatus, agentStop
        /// The password service's request (issue 28 item 4; KeySharing.AgentAnswer): the
        /// client's connection follows the frame (SCM_RIGHTS); the agent answers the client
        /// itself and replies "state", "reason", "exe" (never the password).
        case servePassword
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

    /// The fuzzer's entry (Tests/fuzz/swift/Fuzz.swift, target control): decodes `bytes` as the
    /// agent decodes a request and the CLI a reply; what decodes is encoded again and must decode
    /// to the same head and fields (a trap otherwise; a key that was not UTF-8 is repaired to a
    /// longer one, which may no longer fit the 64-byte bound). True when `bytes` decoded. (The
    /// kept corpus is replayed through the release CLI: Tests/integration/62-fuzz-replay.sh.)
    public static func fuzzDecode(_ bytes: [UInt8]) -> Bool {
        var input = bytes
        return input.withUnsafeMutableBufferPointer { p -> Bool in
            guard let (head, m) = decode(ksa_buf(data: p.baseAddress, len: p.count, cap: p.count, failed: 0)) else {
                return false
            }
            precondition(m.fields.count <= 64)
            var again = ksa_buf()
            ksa_buf_init(&again)
            defer { ksa_buf_free(&again) }
            encode(head, m, into: &again)
            precondition(again.failed == 0)
            if let (head2, m2) = decode(again) {
                precondition(head2 == head && m2.fields == m.fields, "a decoded control message encodes to another")
            } else {
                precondition(m.fields.keys.contains { $0.utf8.count > 64 }, "a decoded control message encodes to a malformed one")
            }
            return true
        }
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

    /// The CLI's side: connects to the agent (starting it as the module does,
    /// the same C path: Sources/AgentProtocol/connect.c, with the same
    /// minimal environment), sends one request, returns the reply's fields or
    /// throws its error line. Every wait is bounded (KEYSHARE_AGENT_TIMEOUT,
    /// default 120 s for the reply).
    /// `passing`: a descriptor sent right after the request (SCM_RIGHTS);
    /// `timeoutMilliseconds`: the reply's bound instead of KEYSHARE_AGENT_TIMEOUT's.
    public static func call(_ op: Op, _ request: Message, program: String, start: Bool = true,
                            passing: Int32? = nil, timeoutMilliseconds: Int32? = nil) throws -> Message {
        let fd = try connect(program: program, start: start)
        defer { close(fd) }
        ksa_set_timeout(fd, timeoutMilliseconds ?? ksa_timeout_ms("KEYSHARE_AGENT_TIMEOUT", Int32(KSA_CALL_TIMEOUT_MS)))
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }  // zeroes: the request may hold a PIN
        encode(op.rawValue, request, into: &b)
        guard b.failed == 0, ksa_write_frame(fd, b.data, b.len) == 0 else {
            throw Failure("cannot send the request to the keyshare agent: \(String(cString: strerror(errno)))")
        }
        if let passing, ksa_send_fd(fd, passing) != 0 {
            throw Failure("cannot pass the connection to the keyshare agent: \(String(cString: strerror(errno)))")
        }
        ksa_buf_reset(&b)
        guard ksa_read_frame(fd, &b) == 0 else {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT {
                throw Failure("the keyshare agent did not answer in time (KEYSHARE_AGENT_TIMEOUT)")
            }
            throw Failure("the keyshare agent closed the connection without an answer (see its log)")
        }
        guard let (status, reply) = decode(b) else {
            throw Failure("the keyshare agent sent a malformed answer (an agent of another version? keyshare agent restart)")
        }
        guard status == 0 else { throw Failure(reply.string("error") ?? "the keyshare agent refused the request") }
        return reply
    }

    /// Not running (start: false and nothing listens).
    public struct NotRunning: Error {}

    static func connect(program: String, start: Bool) throws -> Int32 {
        var why = [CChar](repeating: 0, count: 1024)
        var peer: pid_t = 0
        let noStart = getenv("KEYSHARE_AGENT_NO_START").map { String(cString: $0) } == "1"
        let fd = ksa_connect_or_start(program, start && !noStart ? 1 : 0, Int32(KSA_CONNECT_TIMEOUT_MS), &peer, &why, why.count)
        if fd >= 0 { return fd }
        if fd == -1 {
            if start && noStart { throw Failure("the keyshare agent is not running and KEYSHARE_AGENT_NO_START=1 forbids starting it") }
            throw NotRunning()
        }
        throw Failure(Agent.string(why))
    }

}
