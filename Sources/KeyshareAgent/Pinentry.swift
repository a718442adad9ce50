#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Which pinentry the agent runs and how long a person has to answer
/// (docs/agent.md, "The agent's prompt"), read once from the agent's own
/// environment (its starter's: a systemd unit's Environment=, the module's
/// KEYSHARE_PINENTRY when it auto-starts the agent), never a client's.
public struct PinentrySettings: Sendable, Equatable {
    public let program: String
    /// Seconds: pinentry's own SETTIMEOUT and the agent's bound on the whole dialog.
    public let timeout: Int

    public static let defaultTimeout = 60
    /// Below the client's 120 s call timeout (agent_client.c): a prompt that
    /// runs out still gets its CKR_FUNCTION_CANCELED to the application.
    public static let maxTimeout = 110

    public init(program: String, timeout: Int) {
        self.program = program
        self.timeout = timeout
    }

    /// KEYSHARE_PINENTRY (a path, or a name looked up on PATH; `none` or
    /// empty: no prompt), else `pinentry` on PATH; KEYSHARE_AGENT_PROMPT_TIMEOUT
    /// seconds (1 to 110, default 60). nil with the reason when there is no
    /// usable program.
    public static func fromEnvironment() -> (settings: PinentrySettings?, note: String) {
        var timeout = defaultTimeout
        if let t = getenv("KEYSHARE_AGENT_PROMPT_TIMEOUT").map({ String(cString: $0) }) {
            if let n = Int(t), (1...maxTimeout).contains(n) { timeout = n }
        }
        let named = getenv("KEYSHARE_PINENTRY").map { String(cString: $0) }
        if let named, named.isEmpty || named == "none" {
            return (nil, "no prompt: KEYSHARE_PINENTRY is \(named.isEmpty ? "empty" : "none")")
        }
        let wanted = named ?? "pinentry"
        guard let path = executable(wanted) else {
            return (nil, "no prompt: \(named == nil ? "no pinentry on PATH" : "KEYSHARE_PINENTRY \(wanted) is not an executable file")")
        }
        return (PinentrySettings(program: path, timeout: timeout), "prompt: \(path), \(timeout) s to answer")
    }

    /// An absolute path to a regular executable file: `name` itself when it
    /// holds a slash, else the first match on PATH.
    static func executable(_ name: String) -> String? {
        func usable(_ p: String) -> Bool {
            var st = stat()
            return stat(p, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && access(p, X_OK) == 0
        }
        if name.contains("/") { return name.hasPrefix("/") && usable(name) ? name : nil }
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") where dir.hasPrefix("/") {
            let p = dir + "/" + name
            if usable(p) { return p }
        }
        return nil
    }
}

/// Where a prompt is shown: the client's display variables and terminal
/// (hello fields 2 and 3), and the client's pidfd (the dialog ends when the
/// client exits).
public struct PromptPlace: Sendable {
    public var display: ClientDisplay
    public var abortFD: Int32
    public init(display: ClientDisplay, abortFD: Int32 = -1) {
        self.display = display
        self.abortFD = abortFD
    }

    /// Whether a person can be reached there: a graphical display or a terminal.
    public var reachable: Bool {
        display.tty != nil || !(display.variables["DISPLAY"] ?? "").isEmpty
            || !(display.variables["WAYLAND_DISPLAY"] ?? "").isEmpty
    }
}

/// A pinentry dialog over the Assuan protocol (the GnuPG prompt programs:
/// pinentry-gnome3, -gtk2, -qt, -curses, -tty, or the tests' scripted one).
/// The program runs with the client's display variables and PATH, HOME and
/// LANG, on the client's terminal (--ttyname, OPTION ttyname/ttytype) when it
/// has one; every read is bounded by the dialog's deadline; the program (its
/// process group) is killed and reaped at the end, whatever happened. The
/// PIN is decoded into one buffer, the line buffers holding it are zeroed,
/// and nothing of the dialog is logged.
public enum Pinentry {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The person cancelled (or closed the window).
        case canceled
        /// No answer within the timeout.
        case timedOut
        /// The client exited meanwhile.
        case clientGone
        /// The program could not be run or did not speak Assuan (the reason; no secret in it).
        case failed(String)

        public var description: String {
            switch self {
            case .canceled: return "cancelled"
            case .timedOut: return "no answer in time"
            case .clientGone: return "the client exited"
            case .failed(let why): return "no prompt shown: \(why)"
            }
        }
    }

    /// CONFIRM's three answers: OK, the "not OK" button (SETNOTOK), Cancel.
    public enum Choice: Sendable, Equatable { case ok, notOK, cancel }

    public struct Texts: Sendable {
        public var title: String
        public var description: String
        public var prompt: String = "PIN:"
        public var error: String?
        public var ok: String?
        public var notOK: String?
        public var cancel: String?
        public init(title: String, description: String) {
            self.title = title
            self.description = description
        }
    }

    /// GETPIN: the PIN (the caller zeroes it), or why there is none.
    public static func getPIN(_ settings: PinentrySettings, _ place: PromptPlace, _ texts: Texts) -> Result<[UInt8], Failure> {
        dialog(settings, place, texts) { s in
            let r = try s.transact("GETPIN")
            if let code = r.error {
                var data = r.data
                for i in data.indices { data[i] = 0 }
                throw Self.failure(code)
            }
            return r.data
        }
    }

    /// CONFIRM with the texts' buttons.
    public static func confirm(_ settings: PinentrySettings, _ place: PromptPlace, _ texts: Texts) -> Result<Choice, Failure> {
        dialog(settings, place, texts) { s in
            let r = try s.transact("CONFIRM")
            guard let code = r.error else { return .ok }
            switch code & 0xFFFF {
            case 114: return .notOK   // GPG_ERR_NOT_CONFIRMED: the SETNOTOK button
            case 99: return .cancel   // GPG_ERR_CANCELED
            default: throw Self.failure(code)
            }
        }
    }

    static func failure(_ code: UInt32) -> Failure {
        switch code & 0xFFFF {
        case 99: return .canceled
        case 62: return .timedOut    // GPG_ERR_TIMEOUT: pinentry's own SETTIMEOUT
        default: return .failed("pinentry answered error \(code)")
        }
    }

    private static func dialog<T>(_ settings: PinentrySettings, _ place: PromptPlace, _ texts: Texts,
                                  _ ask: (AssuanSession) throws -> T) -> Result<T, Failure> {
        let session: AssuanSession
        do { session = try AssuanSession.start(settings, place) } catch let f as Failure { return .failure(f) } catch {
            return .failure(.failed("\(error)"))
        }
        defer { session.end() }
        do {
            if let tty = place.display.tty {
                _ = try session.transact("OPTION ttyname=" + escape(tty))
                _ = try session.transact("OPTION ttytype=" + escape(place.display.variables["TERM"] ?? "dumb"))
            }
            // Unknown options and buttons are not errors: older pinentries lack some.
            _ = try session.transact("SETTITLE " + escape(texts.title))
            _ = try session.transact("SETDESC " + escape(texts.description))
            _ = try session.transact("SETPROMPT " + escape(texts.prompt))
            if let e = texts.error { _ = try session.transact("SETERROR " + escape(e)) }
            if let b = texts.ok { _ = try session.transact("SETOK " + escape(b)) }
            if let b = texts.notOK { _ = try session.transact("SETNOTOK " + escape(b)) }
            if let b = texts.cancel { _ = try session.transact("SETCANCEL " + escape(b)) }
            _ = try session.transact("SETTIMEOUT \(settings.timeout)")
            return .success(try ask(session))
        } catch let f as Failure {
            return .failure(f)
        } catch {
            return .failure(.failed("\(error)"))
        }
    }

    /// Assuan's escaping of a command's text: %, CR, LF and the other control
    /// bytes as %XX (pinentry shows %0A as a line break); at most `limit`
    /// bytes, never cut inside an escape or a UTF-8 sequence (an Assuan line
    /// is at most 1,000 bytes).
    static func escape(_ s: String, limit: Int = 900) -> String {
        var out: [UInt8] = []
        for scalar in s.unicodeScalars {
            var bytes: [UInt8] = []
            let utf8 = Array(String(scalar).utf8)
            if utf8.count == 1, utf8[0] < 0x20 || utf8[0] == 0x25 || utf8[0] == 0x7F {
                bytes = Array("%".utf8) + Array(hex2(utf8[0]).utf8)
            } else {
                bytes = utf8
            }
            if out.count + bytes.count > limit { break }
            out += bytes
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hex2(_ b: UInt8) -> String {
        let d = Array("0123456789ABCDEF".utf8)
        return String(decoding: [d[Int(b >> 4)], d[Int(b & 15)]], as: UTF8.self)
    }
}

/// One running pinentry and its Assuan connection (a socket pair: the
/// program's stdin and stdout).
final class AssuanSession {
    let pid: pid_t
    let fd: Int32
    let abortFD: Int32
    let deadline: Double
    /// What was read: `buffer[start..<filled]` is not consumed yet. One
    /// fixed allocation, zeroed as lines are taken and at the end (a D line
    /// holds the PIN): no copy of it is left behind by growing or shifting.
    private let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: AssuanSession.capacity)
    private var start = 0
    private var filled = 0
    /// The longest line accepted (Assuan's limit is 1,000 bytes), and the buffer's size.
    static let maxLine = 4096
    static let capacity = 8192

    private init(pid: pid_t, fd: Int32, abortFD: Int32, deadline: Double) {
        self.pid = pid
        self.fd = fd
        self.abortFD = abortFD
        self.deadline = deadline
        buffer.initialize(repeating: 0, count: Self.capacity)
    }

    deinit {
        explicit_bzero(buffer, Self.capacity)
        buffer.deallocate()
    }

    static func start(_ settings: PinentrySettings, _ place: PromptPlace) throws -> AssuanSession {
        var env: [String] = []
        for (k, v) in place.display.variables.sorted(by: { $0.key < $1.key }) where !v.isEmpty { env.append("\(k)=\(v)") }
        for name in ["PATH", "HOME"] {
            if let v = getenv(name) { env.append("\(name)=\(String(cString: v))") }
        }
        if place.display.variables["LANG"] == nil, let v = getenv("LANG") { env.append("LANG=\(String(cString: v))") }
        var args = [settings.program]
        if let tty = place.display.tty {
            args += ["--ttyname", tty, "--ttytype", place.display.variables["TERM"] ?? "dumb"]
        }
        let argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var fd: Int32 = -1
        let pid = keyshare_spawn_prompt(settings.program, argv, envp, &fd)
        guard pid > 0 else {
            throw Pinentry.Failure.failed("cannot run \(settings.program): \(String(cString: strerror(-pid)))")
        }
        let s = AssuanSession(pid: pid, fd: fd, abortFD: place.abortFD, deadline: Agent.monotonic() + Double(settings.timeout))
        // The greeting: "OK Pleased to meet you".
        let hello = try s.response()
        guard hello.error == nil else {
            s.end()
            throw Pinentry.Failure.failed("\(settings.program) did not greet (error \(hello.error ?? 0))")
        }
        return s
    }

    /// Sends one command line and reads its response.
    func transact(_ command: String) throws -> (data: [UInt8], error: UInt32?) {
        try send(Array(command.utf8) + [0x0A])
        return try response()
    }

    private func send(_ line: [UInt8]) throws {
        var off = 0
        while off < line.count {
            try wait(for: Int16(POLLOUT))
            let n = line[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw Pinentry.Failure.failed("pinentry closed its input")
            }
            off += n
        }
    }

    /// Lines until OK or ERR: D lines decoded and joined; status (S), comment
    /// (#) lines skipped; an INQUIRE is cancelled (CAN: nothing is offered).
    private func response() throws -> (data: [UInt8], error: UInt32?) {
        var data: [UInt8] = []
        while true {
            var line = try readLine()
            defer { for i in line.indices { line[i] = 0 } }
            if line.starts(with: Array("OK".utf8)) && (line.count == 2 || line[2] == 0x20) { return (data, nil) }
            if line.starts(with: Array("ERR".utf8)) && (line.count == 3 || line[3] == 0x20) {
                for i in data.indices { data[i] = 0 }
                let digits = line.dropFirst(4).prefix { $0 >= 0x30 && $0 <= 0x39 }
                return ([], UInt32(String(decoding: digits, as: UTF8.self)) ?? 1)
            }
            if line.starts(with: Array("D ".utf8)) {
                try Self.unescape(line.dropFirst(2), into: &data)
                continue
            }
            if line.starts(with: Array("INQUIRE".utf8)) {
                try send(Array("CAN\n".utf8))
                continue
            }
            // "S ..." status and "# ..." comments carry nothing the agent needs.
        }
    }

    /// Assuan's %XX decoding, appended to `out`.
    static func unescape(_ s: ArraySlice<UInt8>, into out: inout [UInt8]) throws {
        var i = s.startIndex
        while i < s.endIndex {
            if s[i] == 0x25 {
                guard i + 2 < s.endIndex, let hi = hexValue(s[i + 1]), let lo = hexValue(s[i + 2]) else {
                    throw Pinentry.Failure.failed("pinentry sent a malformed D line")
                }
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(s[i])
                i += 1
            }
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    /// One line (without its LF), within the deadline.
    private func readLine() throws -> [UInt8] {
        while true {
            if let nl = (start..<filled).first(where: { buffer[$0] == 0x0A }) {
                let line = Array(UnsafeBufferPointer(start: buffer + start, count: nl - start))
                explicit_bzero(buffer + start, nl + 1 - start)
                start = nl + 1
                if start == filled { (start, filled) = (0, 0) }
                return line
            }
            guard filled - start <= Self.maxLine else { throw Pinentry.Failure.failed("pinentry sent an overlong line") }
            if filled == Self.capacity {  // move the partial line to the front, zero where it was
                let n = filled - start
                memmove(buffer, buffer + start, n)
                explicit_bzero(buffer + n, filled - n)
                (start, filled) = (0, n)
            }
            try wait(for: Int16(POLLIN))
            let n = recv(fd, buffer + filled, Self.capacity - filled, Int32(MSG_DONTWAIT))
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else { throw Pinentry.Failure.failed("pinentry exited without an answer") }
            filled += n
        }
    }

    /// Until the socket is ready for `events`; throws at the deadline or when
    /// the client has exited (its pidfd is readable).
    private func wait(for events: Int16) throws {
        while true {
            let left = deadline - Agent.monotonic()
            guard left > 0 else { throw Pinentry.Failure.timedOut }
            var fds = [pollfd(fd: fd, events: events, revents: 0), pollfd(fd: abortFD, events: Int16(POLLIN), revents: 0)]
            let r = poll(&fds, abortFD >= 0 ? 2 : 1, Int32(min(left, 1) * 1000) + 1)
            if r < 0 && errno != EINTR { throw Pinentry.Failure.failed("poll: \(String(cString: strerror(errno)))") }
            if r <= 0 { continue }
            if abortFD >= 0 && fds[1].revents != 0 { throw Pinentry.Failure.clientGone }
            if fds[0].revents != 0 { return }
        }
    }

    /// BYE, then the program and anything it started (its process group) is
    /// killed if still there after a moment, then reaped. The group is killed
    /// before the leader is reaped: until then its pid, and so the group ID,
    /// cannot name another process.
    func end() {
        _ = "BYE\n".withCString { Glibc.send(fd, $0, 4, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        close(fd)
        explicit_bzero(buffer, Self.capacity)
        (start, filled) = (0, 0)
        let until = Agent.monotonic() + 0.5
        var info = siginfo_t()
        while Agent.monotonic() < until {
            info = siginfo_t()
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0, info.si_signo != 0 { break }
            usleep(10_000)
        }
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}
