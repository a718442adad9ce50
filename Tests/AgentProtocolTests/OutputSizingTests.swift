import AgentProtocol
import CPKCS11
import Testing

/// The agent sizes a byte output by what the call can write, not by the capacity the client
/// declares (codec.c ksa_decode_request_sized, serve.c decode_and_call): C_Encrypt of 16 KiB into a
/// 1 MiB buffer had the agent allocate and wipe 1 MiB a call. When the module wants more than
/// that size the agent calls again at the declared capacity, so the client sees what a direct
/// call would have answered.
@Suite struct OutputSizingTests {
    /// A request as the client encodes it: session 1, `input` bytes in, an output buffer of
    /// `capacity` (the buffer itself is not sent, only that it exists and its size).
    static func request(_ fn: ksa_function, input: Int, capacity: CK_ULONG) -> [UInt8] {
        var data = [UInt8](repeating: 7, count: input)
        var out: UInt8 = 0
        var len = capacity
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        data.withUnsafeMutableBytes { d in
            withUnsafeMutablePointer(to: &out) { o in
                withUnsafeMutablePointer(to: &len) { l in
                    var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                    args[0].ul = 1
                    args[1].ptr = d.baseAddress; args[1].len = CK_ULONG(input)
                    args[2].ptr = UnsafeMutableRawPointer(o); args[2].plen = l
                    _ = args.withUnsafeMutableBufferPointer { ksa_encode_request(UInt32(fn.rawValue), $0.baseAddress, &b) }
                }
            }
        }
        return Array(UnsafeBufferPointer(start: b.data, count: b.len))
    }

    /// The output capacity the module would see, and whether the agent sized it down.
    static func decoded(_ fn: ksa_function, _ bytes: [UInt8], sized: Bool) -> (capacity: CK_ULONG, reduced: Bool) {
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }
        var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
        var reduced: Int32 = 0
        let rc = bytes.withUnsafeBufferPointer { p -> Int32 in
            var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
            return args.withUnsafeMutableBufferPointer {
                ksa_decode_request_sized(UInt32(fn.rawValue), &r, $0.baseAddress, &arena, sized ? 1 : 0, &reduced)
            }
        }
        #expect(rc == 0)
        return (args[2].plen?.pointee ?? 0, reduced != 0)
    }

    @Test func encryptOutputFollowsTheInputNotTheDeclaredCapacity() {
        let big = Self.request(KSA_FN_Encrypt, input: 16, capacity: 1 << 20)
        #expect(Self.decoded(KSA_FN_Encrypt, big, sized: true) == (16 + 4096, true))
        #expect(Self.decoded(KSA_FN_Encrypt, big, sized: false) == (1 << 20, false))
        // A capacity under the bound is the client's, as before.
        let small = Self.request(KSA_FN_Encrypt, input: 16, capacity: 100)
        #expect(Self.decoded(KSA_FN_Encrypt, small, sized: true) == (100, false))
        // Signing is not bounded by its input (an SLH-DSA signature is 49,856 bytes).
        let sign = Self.request(KSA_FN_Sign, input: 32, capacity: 1 << 20)
        #expect(Self.decoded(KSA_FN_Sign, sign, sized: true) == (1 << 20, false))
    }

    /// How many times the fake C_Encrypt ran, and the size it insists on.
    nonisolated(unsafe) static var calls = 0
    static let needed: CK_ULONG = 10_000

    /// A C_Encrypt whose output is larger than its input plus the slack: CKR_BUFFER_TOO_SMALL with
    /// the size it needs (the operation stays active, as the spec says), else `needed` bytes of 0xAB.
    static let encrypt: CK_C_Encrypt = { _, _, _, out, outLen in
        OutputSizingTests.calls += 1
        guard let outLen else { return CKR_ARGUMENTS_BAD }
        guard let out, outLen.pointee >= OutputSizingTests.needed else {
            outLen.pointee = OutputSizingTests.needed
            return out == nil ? CKR_OK : CKR_BUFFER_TOO_SMALL
        }
        for i in 0..<Int(OutputSizingTests.needed) { out[i] = 0xAB }
        outLen.pointee = OutputSizingTests.needed
        return CKR_OK
    }

    /// Serves one request with the fake table and applies the reply to a client buffer of `capacity`.
    static func serve(capacity: Int) -> (rv: CK_RV, length: CK_ULONG, bytes: [UInt8]) {
        var table = CK_FUNCTION_LIST_3_0()
        table.C_Encrypt = encrypt
        let fn = UInt32(KSA_FN_Encrypt.rawValue)
        var frame: [UInt8] = [9, 0, 0, 0] + (0..<4).map { UInt8(truncatingIfNeeded: fn >> (8 * $0)) }   // call id 9, fn
        frame += request(KSA_FN_Encrypt, input: 16, capacity: CK_ULONG(capacity))
        var reply = ksa_buf()
        ksa_buf_init(&reply)
        defer { ksa_buf_free(&reply) }
        _ = frame.withUnsafeBufferPointer { ksa_serve(&table, $0.baseAddress, $0.count, &reply) }
        var data = [UInt8](repeating: 7, count: 16)
        var out = [UInt8](repeating: 0, count: capacity)
        var len = CK_ULONG(capacity)
        let rv = data.withUnsafeMutableBytes { d in
            out.withUnsafeMutableBytes { o in
                withUnsafeMutablePointer(to: &len) { l -> CK_RV in
                    var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                    args[0].ul = 1
                    args[1].ptr = d.baseAddress; args[1].len = 16
                    args[2].ptr = o.baseAddress; args[2].plen = l; args[2].cap = CK_ULONG(capacity)
                    var r = ksa_rd(p: reply.data + 4, left: reply.len - 4, failed: 0)   // after the call id
                    return args.withUnsafeMutableBufferPointer { ksa_apply_reply(fn, $0.baseAddress, &r) }
                }
            }
        }
        return (rv, len, Array(out.prefix(Int(min(len, CK_ULONG(capacity))))))
    }

    @Test func moreThanTheSizedBufferIsServedAtTheDeclaredCapacity() {
        Self.calls = 0
        let big = Self.serve(capacity: 1 << 20)
        #expect(big.rv == CKR_OK)
        #expect(big.length == Self.needed)
        #expect(big.bytes == [UInt8](repeating: 0xAB, count: Int(Self.needed)))
        #expect(Self.calls == 2)   // sized (too small for it), then at the client's 1 MiB

        // A client buffer too small for the module is told so, with the size, as a direct call would.
        Self.calls = 0
        let small = Self.serve(capacity: 5_000)
        #expect(small.rv == CKR_BUFFER_TOO_SMALL)
        #expect(small.length == Self.needed)
        #expect(Self.calls == 2)
    }
}
