import AgentProtocol
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The hello and its reply (Sources/AgentProtocol/hello.c, docs/agent.md
/// "Hello"), read by the agent and the client from a peer that may be
/// hostile: what is built parses back to the same fields, and every
/// truncated, oversized, duplicated or trailing input is refused. The
/// fuzzer Tests/fuzz/hello_fuzz.c drives the same two parsers.
@Suite struct HelloTests {
    static let token: [UInt8] = Array(1...16)
    static let zero = [UInt8](repeating: 0, count: Int(KSA_TOKEN_LEN))

    func bytes(_ b: ksa_buf) -> [UInt8] { b.len > 0 ? Array(UnsafeBufferPointer(start: b.data, count: b.len)) : [] }

    func hello(flags: UInt16 = 0, token: [UInt8] = zero, groups: String?) -> [UInt8] {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        ksa_hello_build(&b, flags, token, groups)
        return bytes(b)
    }

    func reply(status: UInt16, token: [UInt8] = zero, reason: String?) -> [UInt8] {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        ksa_hello_reply_build(&b, status, token, reason)
        return bytes(b)
    }

    /// Parses; the groups and token copied out (they point into the input).
    func parse(_ input: [UInt8]) -> (rc: Int32, h: ksa_hello, groups: String?, token: [UInt8]) {
        input.withUnsafeBufferPointer { p in
            var h = ksa_hello()
            let rc = ksa_hello_parse(p.baseAddress, p.count, &h)
            let groups = h.groups.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(h.groups_len)), as: UTF8.self) }
            let token = h.token.map { Array(UnsafeBufferPointer(start: $0, count: Int(KSA_TOKEN_LEN))) } ?? []
            return (rc, h, groups, token)
        }
    }

    func parseReply(_ input: [UInt8]) -> (rc: Int32, r: ksa_hello_reply, reason: String) {
        input.withUnsafeBufferPointer { p in
            var r = ksa_hello_reply()
            let rc = ksa_hello_reply_parse(p.baseAddress, p.count, &r)
            let reason = withUnsafeBytes(of: r.reason) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            return (rc, r, reason)
        }
    }

    /// A hello of this version with the given (tag, value) fields, built by hand.
    func fields(_ list: [(UInt16, [UInt8])], count: UInt16? = nil) -> [UInt8] {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        ksa_put_u32(&b, KSA_MAGIC)
        ksa_put_u16(&b, UInt16(KSA_VERSION))
        ksa_put_u16(&b, 0)
        ksa_put_raw(&b, Self.token, Self.token.count)
        ksa_put_u16(&b, count ?? UInt16(list.count))
        for (tag, value) in list {
            ksa_put_u16(&b, tag)
            ksa_put_u32(&b, UInt32(value.count))
            value.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, $0.count) }
        }
        return bytes(b)
    }

    @Test func helloRoundTrips() {
        let new = parse(hello(groups: nil))
        #expect(new.rc == 0 && new.groups == nil && new.h.groups_len == 0 && new.token == Self.zero && new.h.flags == 0)
        let grouped = parse(hello(flags: UInt16(KSA_HELLO_SHM), groups: "com.example.app,b"))
        #expect(grouped.rc == 0 && grouped.groups == "com.example.app,b" && grouped.h.flags == UInt16(KSA_HELLO_SHM))
        let empty = parse(hello(groups: ""))
        #expect(empty.rc == 0 && empty.groups == "" && empty.h.groups_len == 0)
        let attach = parse(hello(flags: UInt16(KSA_HELLO_LOG | KSA_HELLO_SHM), token: Self.token, groups: nil))
        #expect(attach.rc == 0 && attach.token == Self.token && attach.h.magic == KSA_MAGIC && attach.h.version == UInt16(KSA_VERSION))
        // Groups longer than a field may be are cut to KSA_HELLO_MAX_FIELD by the builder, and still parse.
        let long = String(repeating: "g", count: Int(KSA_HELLO_MAX_FIELD) + 10)
        let cut = parse(hello(groups: long))
        #expect(cut.rc == 0 && cut.h.groups_len == UInt32(KSA_HELLO_MAX_FIELD))
    }

    @Test func replyRoundTrips() {
        let ok = parseReply(reply(status: 0, token: Self.token, reason: nil))
        #expect(ok.rc == 0 && ok.r.status == 0 && ok.reason == "" && ok.r.version == UInt16(KSA_VERSION))
        #expect(ok.r.token.map { Array(UnsafeBufferPointer(start: $0, count: 16)) } == Self.token)
        let refused = parseReply(reply(status: 3, reason: "refused by the policy"))
        #expect(refused.rc == 0 && refused.r.status == 3 && refused.reason == "refused by the policy")
        // Only printable ASCII reaches a terminal: anything else becomes '?'.
        let odd = parseReply(reply(status: 4, reason: "bell\u{7}\ttab\u{1b}[2Jé"))
        #expect(odd.rc == 0 && odd.reason == "bell??tab?[2J??")
        // A longer reason is cut to KSA_HELLO_MAX_REASON by the builder.
        let long = parseReply(reply(status: 4, reason: String(repeating: "r", count: Int(KSA_HELLO_MAX_REASON) + 1)))
        #expect(long.rc == 0 && long.reason.utf8.count == Int(KSA_HELLO_MAX_REASON))
    }

    @Test func everyTruncationIsRefused() {
        let full = hello(flags: 1, token: Self.token, groups: "a,b,c")
        #expect(parse(full).rc == 0)
        for n in 0..<full.count { #expect(parse(Array(full[0..<n])).rc == -1, "hello cut to \(n) bytes") }
        let withReason = reply(status: 2, reason: "unknown client token")
        #expect(parseReply(withReason).rc == 0)
        for n in 0..<withReason.count { #expect(parseReply(Array(withReason[0..<n])).rc == -1, "reply cut to \(n) bytes") }
    }

    @Test func oversizeFieldsAreRefused() {
        let maxField = Int(KSA_HELLO_MAX_FIELD)
        #expect(parse(fields([(UInt16(KSA_HELLO_GROUPS), [UInt8](repeating: 0x61, count: maxField))])).rc == 0)
        #expect(parse(fields([(UInt16(KSA_HELLO_GROUPS), [UInt8](repeating: 0x61, count: maxField + 1))])).rc == -1)
        #expect(parse(fields([(77, [UInt8](repeating: 0, count: maxField + 1))])).rc == -1)  // unknown, still bounded
        let many = (0...Int(KSA_HELLO_MAX_FIELDS)).map { _ in (UInt16(9), [UInt8]()) }
        #expect(parse(fields(Array(many.dropLast()))).rc == 0)
        #expect(parse(fields(many)).rc == -1)
        // A field length past the input (u32 0xffffffff) and a count past the fields.
        var lying = fields([(UInt16(KSA_HELLO_GROUPS), [0x61])])
        lying.replaceSubrange(28..<32, with: [0xff, 0xff, 0xff, 0xff])
        #expect(parse(lying).rc == -1)
        #expect(parse(fields([(9, [1])], count: 2)).rc == -1)
        // A reason length over KSA_HELLO_MAX_REASON, even with that many bytes present.
        var r = reply(status: 1, reason: nil)
        let over = Int(KSA_HELLO_MAX_REASON) + 1
        r.replaceSubrange(24..<26, with: [UInt8(over & 0xff), UInt8(over >> 8)])
        r += [UInt8](repeating: 0x41, count: over)
        #expect(parseReply(r).rc == -1)
    }

    @Test func unknownTagsAreSkippedAndGroupsComeOnce() {
        let later = parse(fields([(9, Array("a later client says more".utf8)), (UInt16(KSA_HELLO_GROUPS), Array("x,y".utf8)), (40, [])]))
        #expect(later.rc == 0 && later.groups == "x,y" && later.token == Self.token)
        #expect(parse(fields([(9, [1, 2, 3])])).rc == 0)
        let twice = fields([(UInt16(KSA_HELLO_GROUPS), Array("a".utf8)), (UInt16(KSA_HELLO_GROUPS), Array("b".utf8))])
        #expect(parse(twice).rc == -1)
        #expect(parse(fields([(UInt16(KSA_HELLO_GROUPS), [0x61, 0, 0x62])])).rc == -1)   // no NUL in the groups
    }

    /// The display variables and the terminal (issue 27): only listed names, NAME=VALUE, at most
    /// KSA_HELLO_MAX_DISPLAY; one terminal under /dev.
    @Test func displayAndTerminalFields() throws {
        let env = ["DISPLAY=:0", "HOME=/home/u", "PIN=1234", "LANG=C.UTF-8", "TERM=xterm", "WAYLAND_DISPLAY=w",
                   "XAUTHORITY=/x", "XDG_SESSION_TYPE=x11", "XDG_RUNTIME_DIR=/run/user/1",
                   "DBUS_SESSION_BUS_ADDRESS=unix:path=/b", "DISPLAY=:1", "LANG=C"]
        var ptrs: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { ptrs.forEach { free($0) } }
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        ksa_hello_build_full(&b, 0, Self.zero, "g", &ptrs, "/dev/pts/7")
        let built = bytes(b)
        let parsed = built.withUnsafeBufferPointer { p -> (Int32, [String], String?) in
            var h = ksa_hello()
            let rc = ksa_hello_parse(p.baseAddress, p.count, &h)
            let spans = withUnsafeBytes(of: h.display) { Array($0.bindMemory(to: ksa_span.self)) }
            let display = spans.prefix(Int(h.display_count)).map { String(decoding: UnsafeBufferPointer(start: $0.p, count: Int($0.len)), as: UTF8.self) }
            let tty = h.tty.p.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(h.tty.len)), as: UTF8.self) }
            return (rc, display, tty)
        }
        #expect(parsed.0 == 0)
        // HOME and PIN are not display variables; the first eight listed ones go.
        #expect(parsed.1 == ["DISPLAY=:0", "LANG=C.UTF-8", "TERM=xterm", "WAYLAND_DISPLAY=w", "XAUTHORITY=/x",
                             "XDG_SESSION_TYPE=x11", "XDG_RUNTIME_DIR=/run/user/1", "DBUS_SESSION_BUS_ADDRESS=unix:path=/b"])
        #expect(parsed.2 == "/dev/pts/7")
        let display = UInt16(KSA_HELLO_DISPLAY), tty = UInt16(KSA_HELLO_TTY)
        #expect(parse(fields([(display, Array("HOME=/root".utf8))])).rc == -1)   // not a listed name
        #expect(parse(fields([(display, Array("DISPLAY".utf8))])).rc == -1)      // no '='
        #expect(parse(fields([(display, Array("=:0".utf8))])).rc == -1)          // no name
        #expect(parse(fields([(display, Array("TERM=a\u{0}b".utf8))])).rc == -1)
        #expect(parse(fields((0...Int(KSA_HELLO_MAX_DISPLAY)).map { _ in (display, Array("LANG=C".utf8)) })).rc == -1)
        #expect(parse(fields([(tty, Array("/dev/tty1".utf8))])).rc == 0)
        #expect(parse(fields([(tty, Array("/etc/passwd".utf8))])).rc == -1)
        #expect(parse(fields([(tty, Array("/dev/".utf8))])).rc == -1)
        #expect(parse(fields([(tty, Array("/dev/".utf8) + [UInt8](repeating: 0x61, count: 251))])).rc == -1)   // 256 bytes
        #expect(parse(fields([(tty, Array("/dev/a".utf8)), (tty, Array("/dev/b".utf8))])).rc == -1)   // once
    }

    @Test func trailingBytesAreRefused() {
        #expect(parse(hello(groups: "a") + [0]).rc == -1)
        #expect(parse(hello(groups: nil) + [0, 0]).rc == -1)
        #expect(parseReply(reply(status: 0, reason: nil) + [0]).rc == -1)
        #expect(parseReply(reply(status: 3, reason: "no") + [0x41]).rc == -1)
    }

    @Test func anotherVersionGivesMinusTwoAndWrongMagicMinusOne() {
        for version: UInt16 in [4, 6, 0xffff] {
            var h = hello(groups: nil)
            h.replaceSubrange(4..<6, with: [UInt8(version & 0xff), UInt8(version >> 8)])
            let p = parse(Array(h[0..<24]))   // protocol 4's hello: no field count
            #expect(p.rc == -2 && p.h.version == version)
            #expect(parse(h + [1, 2, 3]).rc == -2)   // what follows the 24 bytes is another version's
            var r = reply(status: 6, reason: "busy")
            r.replaceSubrange(4..<6, with: [UInt8(version & 0xff), UInt8(version >> 8)])
            let q = parseReply(Array(r[0..<24]))
            #expect(q.rc == -2 && q.r.version == version && q.r.status == 6)
        }
        var bad = hello(groups: nil)
        bad[0] ^= 0xff
        #expect(parse(bad).rc == -1)
        var badReply = reply(status: 0, reason: nil)
        badReply[3] ^= 0xff
        #expect(parseReply(badReply).rc == -1)
        // A control request's magic is not a hello.
        #expect(parse([0x4b, 0x53, 0x43, 0x31] + Array(hello(groups: nil)[4...])).rc == -1)
    }
}
