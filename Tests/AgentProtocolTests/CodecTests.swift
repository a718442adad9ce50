import AgentProtocol
import CPKCS11
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent protocol's codecs (Sources/AgentProtocol): what the client
/// encodes is what the agent rebuilds, replies write only within the
/// caller's buffers, and every malformed input is an error, not a crash.
@Suite struct CodecTests {
    /// Encodes a request the way the client does (call id 7).
    func request(_ fn: UInt32, _ args: inout [ksa_arg]) -> (CK_RV, [UInt8]) {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        let rv = args.withUnsafeMutableBufferPointer { ksa_encode_request(fn, $0.baseAddress, &b) }
        return (rv, b.len > 0 ? Array(UnsafeBufferPointer(start: b.data, count: b.len)) : [])
    }

    func decode(_ fn: UInt32, _ bytes: [UInt8], _ arena: inout ksa_arena) -> ([ksa_arg], Int32) {
        var out = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
        let rc = bytes.withUnsafeBufferPointer { p -> Int32 in
            var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
            return out.withUnsafeMutableBufferPointer { ksa_decode_request(fn, &r, $0.baseAddress, &arena) }
        }
        return (out, rc)
    }

    func reply(_ fn: UInt32, _ args: inout [ksa_arg], _ rv: CK_RV) -> [UInt8] {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        args.withUnsafeMutableBufferPointer { ksa_encode_reply(fn, $0.baseAddress, rv, &b) }
        return Array(UnsafeBufferPointer(start: b.data, count: b.len))
    }

    func apply(_ fn: UInt32, _ args: inout [ksa_arg], _ bytes: [UInt8]) -> CK_RV {
        bytes.withUnsafeBufferPointer { p in
            var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
            return args.withUnsafeMutableBufferPointer { ksa_apply_reply(fn, $0.baseAddress, &r) }
        }
    }

    @Test func signRoundTripAndOutputConvention() {
        var data: [UInt8] = [1, 2, 3, 4, 5]
        var sig = [UInt8](repeating: 0xEE, count: 8)
        var sigLen: CK_ULONG = 8
        data.withUnsafeMutableBytes { d in
            sig.withUnsafeMutableBytes { s in
                withUnsafeMutablePointer(to: &sigLen) { sl in
                    var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                    args[0].ul = 42
                    args[1].ptr = d.baseAddress; args[1].len = 5
                    args[2].ptr = s.baseAddress; args[2].plen = sl
                    let (rv, bytes) = request(UInt32(KSA_FN_Sign.rawValue), &args)
                    #expect(rv == CKR_OK)
                    var arena = ksa_arena()
                    defer { ksa_arena_free(&arena) }
                    var (server, rc) = decode(UInt32(KSA_FN_Sign.rawValue), bytes, &arena)
                    #expect(rc == 0)
                    #expect(server[0].ul == 42)
                    #expect(server[1].len == 5)
                    #expect(Array(UnsafeRawBufferPointer(start: server[1].ptr, count: 5)) == [1, 2, 3, 4, 5])
                    #expect(server[2].ptr != nil && server[2].plen?.pointee == 8)
                    // The module writes 6 bytes.
                    for i in 0..<6 { server[2].ptr!.storeBytes(of: UInt8(0xA0 + i), toByteOffset: i, as: UInt8.self) }
                    server[2].plen!.pointee = 6
                    let out = reply(UInt32(KSA_FN_Sign.rawValue), &server, CKR_OK)
                    #expect(apply(UInt32(KSA_FN_Sign.rawValue), &args, out) == CKR_OK)
                    #expect(sl.pointee == 6)
                    #expect(Array(s.prefix(8)) == [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xEE, 0xEE])
                }
            }
        }
    }

    @Test func lengthQueryKeepsNullAndBufferTooSmallWritesNoBytes() {
        var len: CK_ULONG = 0
        withUnsafeMutablePointer(to: &len) { pl in
            var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
            args[0].ul = 1
            args[1].plen = pl  // NULL buffer: a length query
            let (_, bytes) = request(UInt32(KSA_FN_SignFinal.rawValue), &args)
            var arena = ksa_arena()
            defer { ksa_arena_free(&arena) }
            var (server, rc) = decode(UInt32(KSA_FN_SignFinal.rawValue), bytes, &arena)
            #expect(rc == 0 && server[1].ptr == nil && server[1].plen != nil)
            server[1].plen!.pointee = 256
            let out = reply(UInt32(KSA_FN_SignFinal.rawValue), &server, CKR_OK)
            #expect(apply(UInt32(KSA_FN_SignFinal.rawValue), &args, out) == CKR_OK)
            #expect(pl.pointee == 256)
        }
    }

    @Test func everyTruncatedRequestIsRefused() {
        let expectedIV = [UInt8](repeating: 9, count: 12)
        var iv = expectedIV
        var aad: [UInt8] = [1, 2]
        iv.withUnsafeMutableBufferPointer { ivp in
            aad.withUnsafeMutableBufferPointer { ap in
                var gcm = CK_GCM_PARAMS()
                gcm.pIv = ivp.baseAddress; gcm.ulIvLen = 12; gcm.ulIvBits = 96
                gcm.pAAD = ap.baseAddress; gcm.ulAADLen = 2; gcm.ulTagBits = 128
                withUnsafeMutablePointer(to: &gcm) { gp in
                    var mech = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM), pParameter: UnsafeMutableRawPointer(gp),
                                            ulParameterLen: CK_ULONG(MemoryLayout<CK_GCM_PARAMS>.size))
                    withUnsafeMutablePointer(to: &mech) { mp in
                        var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                        args[0].ul = 3
                        args[1].ptr = UnsafeMutableRawPointer(mp)
                        args[2].ul = 77
                        let fn = UInt32(KSA_FN_EncryptInit.rawValue)
                        let (rv, bytes) = request(fn, &args)
                        #expect(rv == CKR_OK)
                        var arena = ksa_arena()
                        let (server, rc) = decode(fn, bytes, &arena)
                        #expect(rc == 0)
                        let m = server[1].ptr!.assumingMemoryBound(to: CK_MECHANISM.self).pointee
                        let p = m.pParameter!.assumingMemoryBound(to: CK_GCM_PARAMS.self).pointee
                        #expect(m.mechanism == CK_MECHANISM_TYPE(CKM_AES_GCM))
                        #expect(p.ulIvLen == 12 && p.ulTagBits == 128 && p.ulAADLen == 2)
                        #expect(Array(UnsafeBufferPointer(start: p.pIv, count: 12)) == expectedIV)
                        // The agent's pointers are its own, never the client's.
                        #expect(p.pIv != ivp.baseAddress)
                        ksa_arena_free(&arena)
                        for cut in 0..<bytes.count {
                            var a2 = ksa_arena()
                            let (_, rc2) = decode(fn, Array(bytes.prefix(cut)), &a2)
                            #expect(rc2 == -1, "prefix \(cut) of \(bytes.count) accepted")
                            ksa_arena_free(&a2)
                        }
                        var a3 = ksa_arena()
                        let (_, rc3) = decode(fn, bytes + [0], &a3)
                        #expect(rc3 == -1)
                        ksa_arena_free(&a3)
                    }
                }
            }
        }
    }

    @Test func pointerCarryingParameterNotKnownIsRefused() {
        // CKM_X9_42_DH_DERIVE's CK_X9_42_DH1_DERIVE_PARAMS carries pointers; the
        // protocol does not know it, so it never crosses as raw bytes. (This
        // used CKM_AES_CCM until CK_CCM_PARAMS got its codec entry, breadth_params.c.)
        var param = [UInt8](repeating: 0, count: 48)
        param.withUnsafeMutableBytes { pp in
            var mech = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_X9_42_DH_DERIVE), pParameter: pp.baseAddress,
                                    ulParameterLen: 48)
            withUnsafeMutablePointer(to: &mech) { mp in
                var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                args[1].ptr = UnsafeMutableRawPointer(mp)
                #expect(request(UInt32(KSA_FN_EncryptInit.rawValue), &args).0 == CKR_MECHANISM_PARAM_INVALID)
            }
        }
        #expect(ksa_mechanism_param_is_raw(CK_MECHANISM_TYPE(CKM_RSA_PKCS_OAEP)) == 0)
        #expect(ksa_mechanism_param_is_raw(CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS_PSS)) == 1)
    }

    @Test func forgedRawParameterForAPointerMechanismIsRefusedByTheAgent() {
        // A hand-made request: EncryptInit(h, {CKM_AES_GCM, RAW 40 bytes}, k).
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        ksa_put_u64(&b, 1)
        ksa_put_u8(&b, 1); ksa_put_u64(&b, UInt64(CKM_AES_GCM)); ksa_put_u8(&b, 1)
        ksa_put_u8(&b, 1); ksa_put_u64(&b, 48)
        let junk = [UInt8](repeating: 0x41, count: 48)
        junk.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, 48) }
        ksa_put_u64(&b, 2)
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }
        let (_, rc) = decode(UInt32(KSA_FN_EncryptInit.rawValue), Array(UnsafeBufferPointer(start: b.data, count: b.len)), &arena)
        #expect(rc == -1)
    }

    @Test func oversizeInputsAndFramesAreRefused() {
        var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
        let big = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
        defer { big.deallocate() }
        args[1].ptr = big
        args[1].len = CK_ULONG(KSA_MAX_FRAME) + 1   // never read: too long to cross
        // It crosses as NULL with its length (the module's CKR_ARGUMENTS_BAD
        // must end the agent-side operation), and nothing of it is read.
        let (rv, bytes) = request(UInt32(KSA_FN_SignUpdate.rawValue), &args)
        #expect(rv == CKR_OK)
        #expect(bytes.count < 64)
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }
        let (decoded, rc) = decode(UInt32(KSA_FN_SignUpdate.rawValue), bytes, &arena)
        #expect(rc == 0)
        #expect(decoded[1].ptr == nil && decoded[1].len == CK_ULONG(KSA_MAX_FRAME) + 1)
        // A length no buffer has, with a NULL pointer: the same.
        args[1].ptr = nil
        args[1].len = 1 << 40
        #expect(request(UInt32(KSA_FN_SignUpdate.rawValue), &args).0 == CKR_OK)

        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let n = UInt32(KSA_MAX_FRAME) + 1
        var header: [UInt8] = [UInt8(n & 0xff), UInt8(n >> 8 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 24)]
        _ = write(fds[0], &header, 4)
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        #expect(ksa_read_frame(fds[1], &b) == -1)
        // A good frame after a good header reads back.
        let payload: [UInt8] = [1, 2, 3]
        #expect(ksa_write_frame(fds[0], payload, 3) == 0)
        #expect(ksa_read_frame(fds[1], &b) == 0)
        #expect(Array(UnsafeBufferPointer(start: b.data, count: b.len)) == payload)
    }

    /// frame.c's one-recv reader: small and large frames (past its first
    /// 4 KiB read, and past a frame the size of the first buffer) read back
    /// byte for byte; bytes sent ahead of the reply are refused; an
    /// oversize header is refused.
    @Test func readFrameNextReadsWholeFramesAndRefusesBytesAhead() {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        for size in [0, 1, 3, 4092, 4096, 5000, 100_000] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            // A writer thread for the frames bigger than the socket buffer.
            let fd0 = fds[0], done = DispatchGroup()
            DispatchQueue.global().async(group: done) { _ = ksa_write_frame(fd0, payload, payload.count) }
            #expect(ksa_read_frame_next(fds[1], &b) == 0)
            done.wait()
            #expect(b.len == size)
            #expect(Array(UnsafeBufferPointer(start: b.data, count: b.len)) == payload)
        }
        let one: [UInt8] = [9]
        #expect(ksa_write_frame(fds[0], one, 1) == 0)
        #expect(ksa_write_frame(fds[0], one, 1) == 0)
        #expect(ksa_read_frame_next(fds[1], &b) == -1)
        let n = UInt32(KSA_MAX_FRAME) + 1
        var header: [UInt8] = [UInt8(n & 0xff), UInt8(n >> 8 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 24)]
        _ = write(fds[0], &header, 4)
        #expect(ksa_read_frame_next(fds[1], &b) == -1)
    }

    @Test func getAttributeReplyCannotWritePastTheCallersCapacity() {
        var value = [UInt8](repeating: 0, count: 4)
        value.withUnsafeMutableBytes { vp in
            var attr = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: vp.baseAddress, ulValueLen: 4)
            var caps: [CK_ULONG] = [0]
            withUnsafeMutablePointer(to: &attr) { ap in
                caps.withUnsafeMutableBufferPointer { cp in
                    var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                    args[2].ptr = UnsafeMutableRawPointer(ap); args[2].len = 1; args[2].plen = cp.baseAddress
                    let fn = UInt32(KSA_FN_GetAttributeValue.rawValue)
                    _ = request(fn, &args)
                    #expect(cp[0] == 4)
                    // A reply claiming 8 bytes for a 4-byte buffer: refused, nothing written.
                    var b = ksa_buf()
                    ksa_buf_init(&b)
                    ksa_put_u64(&b, UInt64(CKR_OK)); ksa_put_u8(&b, 1); ksa_put_u8(&b, 1)
                    ksa_put_u64(&b, 8); ksa_put_u8(&b, 1); ksa_put_u32(&b, 8)
                    let eight = [UInt8](repeating: 0x55, count: 8)
                    eight.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, 8) }
                    let bytes = Array(UnsafeBufferPointer(start: b.data, count: b.len))
                    ksa_buf_free(&b)
                    #expect(apply(fn, &args, bytes) == CKR_DEVICE_ERROR)
                    #expect(ap.pointee.ulValueLen == 4)
                }
            }
            #expect(Array(vp) == [0, 0, 0, 0])
        }
    }

    @Test func unknownFunctionHasNoSignature() {
        #expect(ksa_signature(0) == nil)
        #expect(ksa_signature(UInt32(KSA_FN_COUNT.rawValue)) == nil)
        for fn in 1..<UInt32(KSA_FN_COUNT.rawValue) { #expect(ksa_signature(fn) != nil, "function \(fn)") }
    }
}
