import AgentProtocol
import CPKCS11
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// CKA_WRAP_TEMPLATE, CKA_UNWRAP_TEMPLATE, CKA_DERIVE_TEMPLATE across the
/// agent protocol (Sources/AgentProtocol/template_params.c): the inner
/// attributes cross and the agent rebuilds the array in its arena (never the
/// client's pointers); C_GetAttributeValue's inner capacities go out and the
/// inner values come back within the caller's own buffers; a hostile peer's
/// bytes (raw pointer arrays, nesting, counts past 64, lengths past the
/// buffers) are refused, not followed.
@Suite struct TemplateAttributeCodecTests {
    let codec = CodecTests()
    static let size = MemoryLayout<CK_ATTRIBUTE>.stride
    let create = UInt32(KSA_FN_CreateObject.rawValue)
    let get = UInt32(KSA_FN_GetAttributeValue.rawValue)

    /// A request as a hostile client would send it: u32 header skipped by the
    /// codec helpers, so only the arguments.
    func bytes(_ build: (inout ksa_buf) -> Void) -> [UInt8] {
        var b = ksa_buf()
        ksa_buf_init(&b)
        defer { ksa_buf_free(&b) }
        build(&b)
        return Array(UnsafeBufferPointer(start: b.data, count: b.len))
    }

    @Test func aTemplateInATemplateCrossesAsItsEntries() {
        var cls = CK_ULONG(CKO_SECRET_KEY)
        var id: [UInt8] = Array("wrap-ok".utf8)
        withUnsafeMutableBytes(of: &cls) { cp in
            id.withUnsafeMutableBytes { ip in
                var inner = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: cp.baseAddress, ulValueLen: 8),
                             CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_ID), pValue: ip.baseAddress, ulValueLen: 7)]
                inner.withUnsafeMutableBytes { innerp in
                    var outer = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_WRAP_TEMPLATE), pValue: innerp.baseAddress,
                                              ulValueLen: CK_ULONG(2 * Self.size))]
                    outer.withUnsafeMutableBufferPointer { op in
                        var handle: CK_ULONG = 0
                        withUnsafeMutablePointer(to: &handle) { hp in
                            var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                            args[0].ul = 1
                            args[1].ptr = UnsafeMutableRawPointer(op.baseAddress); args[1].len = 1
                            args[2].plen = hp
                            let (rv, req) = codec.request(create, &args)
                            #expect(rv == CKR_OK)
                            // The client's pointers (the inner values' addresses) are not in the request.
                            for p in [UInt(bitPattern: cp.baseAddress), UInt(bitPattern: ip.baseAddress)] {
                                let needle = withUnsafeBytes(of: UInt64(p).littleEndian) { Array($0) }
                                #expect(!req.indices.dropLast(7).contains { Array(req[$0..<$0 + 8]) == needle })
                            }
                            var arena = ksa_arena()
                            defer { ksa_arena_free(&arena) }
                            let (server, rc) = codec.decode(create, req, &arena)
                            #expect(rc == 0)
                            let t = server[1].ptr!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                            #expect(t[0].type == CK_ATTRIBUTE_TYPE(CKA_WRAP_TEMPLATE) && t[0].ulValueLen == CK_ULONG(2 * Self.size))
                            let rebuilt = t[0].pValue!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                            #expect(t[0].pValue != innerp.baseAddress)
                            #expect(rebuilt[0].pValue != cp.baseAddress && rebuilt[1].pValue != ip.baseAddress)
                            #expect(rebuilt[0].type == CK_ATTRIBUTE_TYPE(CKA_CLASS) && rebuilt[0].ulValueLen == 8)
                            #expect(rebuilt[0].pValue!.loadUnaligned(as: CK_ULONG.self) == CK_ULONG(CKO_SECRET_KEY))
                            #expect(rebuilt[1].type == CK_ATTRIBUTE_TYPE(CKA_ID)
                                    && Array(UnsafeRawBufferPointer(start: rebuilt[1].pValue, count: 7)) == Array("wrap-ok".utf8))
                        }
                    }
                }
            }
        }
    }

    /// An outer length the module refuses on its own (not a whole number of
    /// CK_ATTRIBUTEs, 65 entries) crosses as a length the module refuses
    /// with the same code; an inner template crosses as NULL with its length.
    @Test func whatTheModuleRefusesCrossesAsSomethingItRefuses() {
        var junk = [UInt8](repeating: 0xAB, count: 65 * Self.size)
        junk.withUnsafeMutableBytes { jp in
            for (len, seen) in [(Self.size + 1, 1), (65 * Self.size, 65 * Self.size)] {
                var outer = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_UNWRAP_TEMPLATE), pValue: jp.baseAddress, ulValueLen: CK_ULONG(len))]
                outer.withUnsafeMutableBufferPointer { op in
                    var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                    args[1].ptr = UnsafeMutableRawPointer(op.baseAddress); args[1].len = 1
                    let (_, req) = codec.request(create, &args)
                    #expect(req.count < 64)  // the length only, none of the caller's bytes
                    var arena = ksa_arena()
                    defer { ksa_arena_free(&arena) }
                    let (server, rc) = codec.decode(create, req, &arena)
                    #expect(rc == 0)
                    let t = server[1].ptr!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                    #expect(t[0].pValue != nil && t[0].ulValueLen == CK_ULONG(seen))
                    let z = UnsafeRawBufferPointer(start: t[0].pValue, count: seen)
                    #expect(z.allSatisfy { $0 == 0 })
                }
            }
            // An inner CKA_DERIVE_TEMPLATE: NULL with its length in the agent.
            var inner = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_DERIVE_TEMPLATE), pValue: jp.baseAddress, ulValueLen: CK_ULONG(Self.size))]
            inner.withUnsafeMutableBytes { ip in
                var outer = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_WRAP_TEMPLATE), pValue: ip.baseAddress, ulValueLen: CK_ULONG(Self.size))]
                outer.withUnsafeMutableBufferPointer { op in
                    var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                    args[1].ptr = UnsafeMutableRawPointer(op.baseAddress); args[1].len = 1
                    let (_, req) = codec.request(create, &args)
                    var arena = ksa_arena()
                    defer { ksa_arena_free(&arena) }
                    let (server, rc) = codec.decode(create, req, &arena)
                    #expect(rc == 0)
                    let t = server[1].ptr!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                    let rebuilt = t[0].pValue!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                    #expect(rebuilt[0].pValue == nil && rebuilt[0].ulValueLen == CK_ULONG(Self.size))
                }
            }
        }
    }

    /// Hostile requests: raw bytes for a template type (pointers the agent
    /// would follow), a count of 0 or 65, an inner template as bytes, an
    /// overlong inner value, an unknown kind, the array kind on a type that
    /// is no template. Each is refused by the decoder.
    @Test func hostileTemplateEncodingsAreRefused() {
        let wrapT = UInt64(CKA_WRAP_TEMPLATE)
        func req(_ body: @escaping (inout ksa_buf) -> Void) -> [UInt8] {
            bytes { b in
                ksa_put_u64(&b, 1)          // session
                ksa_put_u8(&b, 1); ksa_put_u64(&b, 1)   // template present, one attribute
                body(&b)
                ksa_put_u8(&b, 1)           // phObject present
            }
        }
        let cases: [(String, [UInt8])] = [
            ("raw bytes", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 1); ksa_put_u64(&b, 24); ksa_put_raw(&b, [UInt8](repeating: 0x41, count: 24), 24) }),
            ("count 0", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 2); ksa_put_u32(&b, 0) }),
            ("count 65", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 2); ksa_put_u32(&b, 65)
                for _ in 0..<65 { ksa_put_u64(&b, 0x102); ksa_put_u8(&b, 0); ksa_put_u64(&b, 0) } }),
            ("inner template as bytes", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 2); ksa_put_u32(&b, 1)
                ksa_put_u64(&b, UInt64(CKA_DERIVE_TEMPLATE)); ksa_put_u8(&b, 1); ksa_put_u64(&b, 24)
                ksa_put_raw(&b, [UInt8](repeating: 0x41, count: 24), 24) }),
            ("inner value of 4097", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 2); ksa_put_u32(&b, 1)
                ksa_put_u64(&b, 0x102); ksa_put_u8(&b, 1); ksa_put_u64(&b, 4097)
                ksa_put_raw(&b, [UInt8](repeating: 0, count: 4097), 4097) }),
            ("unknown kind", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 4); ksa_put_u64(&b, 0) }),
            ("refused kind with a length the module takes", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 3); ksa_put_u64(&b, 48) }),
            ("array kind on CKA_LABEL", req { b in ksa_put_u64(&b, 3); ksa_put_u8(&b, 2); ksa_put_u32(&b, 1)
                ksa_put_u64(&b, 0x102); ksa_put_u8(&b, 0); ksa_put_u64(&b, 0) }),
            ("empty kind with a length", req { b in ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 1); ksa_put_u64(&b, 24) }),
        ]
        for (name, r) in cases {
            var arena = ksa_arena()
            let (_, rc) = codec.decode(create, r, &arena)
            ksa_arena_free(&arena)
            #expect(rc == -1, "\(name)")
        }
        // GetAttributeValue: inner capacities naming more entries than the outer capacity holds, or 65.
        for (cap, n) in [(UInt64(24), UInt32(2)), (UInt64(65 * 24), UInt32(65)), (UInt64(48), UInt32(0))] {
            let r = bytes { b in
                ksa_put_u64(&b, 1); ksa_put_u64(&b, 2)
                ksa_put_u8(&b, 1); ksa_put_u64(&b, 1)
                ksa_put_u64(&b, wrapT); ksa_put_u8(&b, 1); ksa_put_u64(&b, cap)
                ksa_put_u32(&b, n)
                for _ in 0..<n { ksa_put_u8(&b, 1); ksa_put_u64(&b, 8) }
            }
            var arena = ksa_arena()
            let (_, rc) = codec.decode(get, r, &arena)
            ksa_arena_free(&arena)
            #expect(rc == -1, "G cap \(cap) n \(n)")
        }
    }

    /// C_GetAttributeValue end to end through the codec: the length query,
    /// too small, inner NULL, an inner buffer too small; then hostile
    /// replies (raw bytes for a template, more entries than the caller's
    /// array, more bytes than an inner buffer) refused with nothing written.
    @Test func getAttributeValueArrayRulesCrossAndRepliesStayInTheCallersBuffers() {
        let size = CK_ULONG(Self.size)
        var clsOut = [UInt8](repeating: 0xEE, count: 8), idOut = [UInt8](repeating: 0xEE, count: 3)
        clsOut.withUnsafeMutableBytes { cp in
            idOut.withUnsafeMutableBytes { ip in
                var inner = [CK_ATTRIBUTE(type: 0xDEAD, pValue: cp.baseAddress, ulValueLen: 8),
                             CK_ATTRIBUTE(type: 0xDEAD, pValue: ip.baseAddress, ulValueLen: 3)]
                inner.withUnsafeMutableBytes { innerp in
                    var outer = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_WRAP_TEMPLATE), pValue: innerp.baseAddress, ulValueLen: 2 * size)
                    var caps: [CK_ULONG] = [0]
                    withUnsafeMutablePointer(to: &outer) { op in
                        caps.withUnsafeMutableBufferPointer { capp in
                            var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                            args[0].ul = 1; args[1].ul = 2
                            args[2].ptr = UnsafeMutableRawPointer(op); args[2].len = 1; args[2].plen = capp.baseAddress
                            let (_, req) = codec.request(get, &args)
                            var arena = ksa_arena()
                            defer { ksa_arena_free(&arena) }
                            var (server, rc) = codec.decode(get, req, &arena)
                            #expect(rc == 0)
                            // The agent sees the array with the caller's inner capacities.
                            let t = server[2].ptr!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                            #expect(t[0].ulValueLen == 2 * size)
                            let a = t[0].pValue!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                            #expect(a[0].ulValueLen == 8 && a[1].ulValueLen == 3 && a[0].pValue != cp.baseAddress)
                            // The module: CKA_CLASS copied, CKA_ID (7 bytes) too small.
                            a[0].type = CK_ATTRIBUTE_TYPE(CKA_CLASS)
                            a[0].pValue!.storeBytes(of: CK_ULONG(CKO_SECRET_KEY), as: CK_ULONG.self)
                            a[1].type = CK_ATTRIBUTE_TYPE(CKA_ID); a[1].ulValueLen = KS_CK_UNAVAILABLE_INFORMATION
                            let out = codec.reply(get, &server, CKR_BUFFER_TOO_SMALL)
                            #expect(codec.apply(get, &args, out) == CKR_BUFFER_TOO_SMALL)
                            let ci = innerp.baseAddress!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
                            #expect(op.pointee.ulValueLen == 2 * size)
                            #expect(ci[0].type == CK_ATTRIBUTE_TYPE(CKA_CLASS) && ci[0].ulValueLen == 8)
                            #expect(cp.loadUnaligned(as: CK_ULONG.self) == CK_ULONG(CKO_SECRET_KEY))
                            #expect(ci[1].type == CK_ATTRIBUTE_TYPE(CKA_ID) && ci[1].ulValueLen == KS_CK_UNAVAILABLE_INFORMATION)
                            #expect(Array(ip) == [0xEE, 0xEE, 0xEE])

                            // Hostile replies.
                            ci[1].ulValueLen = 3
                            func hostile(_ body: (inout ksa_buf) -> Void) -> CK_RV {
                                codec.apply(get, &args, bytes { b in
                                    ksa_put_u64(&b, UInt64(CKR_OK)); ksa_put_u8(&b, 1); ksa_put_u8(&b, 1)
                                    body(&b)
                                })
                            }
                            // Raw bytes (the agent's pointers) for a template value.
                            #expect(hostile { b in ksa_put_u64(&b, 48); ksa_put_u8(&b, 1); ksa_put_u32(&b, 48)
                                ksa_put_raw(&b, [UInt8](repeating: 0x41, count: 48), 48) } == CKR_DEVICE_ERROR)
                            // Three entries for a two-entry array.
                            #expect(hostile { b in ksa_put_u64(&b, 72); ksa_put_u8(&b, 2); ksa_put_u32(&b, 3)
                                for _ in 0..<3 { ksa_put_u64(&b, 0x102); ksa_put_u64(&b, 0); ksa_put_u8(&b, 0) } } == CKR_DEVICE_ERROR)
                            // Seven bytes into the 3-byte inner buffer.
                            #expect(hostile { b in ksa_put_u64(&b, 48); ksa_put_u8(&b, 2); ksa_put_u32(&b, 2)
                                ksa_put_u64(&b, 0); ksa_put_u64(&b, 8); ksa_put_u8(&b, 0)
                                ksa_put_u64(&b, 0x102); ksa_put_u64(&b, 7); ksa_put_u8(&b, 1); ksa_put_u32(&b, 7)
                                ksa_put_raw(&b, [UInt8](repeating: 0x41, count: 7), 7) } == CKR_DEVICE_ERROR)
                            // An outer length that is not its count.
                            #expect(hostile { b in ksa_put_u64(&b, 47); ksa_put_u8(&b, 2); ksa_put_u32(&b, 1)
                                ksa_put_u64(&b, 0); ksa_put_u64(&b, 0); ksa_put_u8(&b, 0) } == CKR_DEVICE_ERROR)
                            #expect(Array(ip) == [0xEE, 0xEE, 0xEE] && ci[1].ulValueLen == 3)
                        }
                    }
                }
            }
        }
    }
}
