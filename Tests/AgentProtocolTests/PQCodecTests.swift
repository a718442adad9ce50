import AgentProtocol
import CPKCS11
import Testing

// The PKCS #11 3.2 post-quantum pieces of the agent protocol (issue 18): CK_SIGN_ADDITIONAL_CONTEXT
// and CK_HASH_SIGN_ADDITIONAL_CONTEXT (Sources/AgentProtocol/pq_params.c), and C_EncapsulateKey /
// C_DecapsulateKey's arguments and outputs.

private func fn(_ f: ksa_function) -> UInt32 { UInt32(f.rawValue) }
private func blank() -> [ksa_arg] { [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS)) }

private func encode(_ f: ksa_function, _ a: inout [ksa_arg]) -> (CK_RV, [UInt8]) {
    var b = ksa_buf()
    ksa_buf_init(&b)
    defer { ksa_buf_free(&b) }
    let rv = a.withUnsafeMutableBufferPointer { ksa_encode_request(fn(f), $0.baseAddress, &b) }
    return (rv, b.len > 0 ? Array(UnsafeBufferPointer(start: b.data, count: b.len)) : [])
}

private func decode(_ f: ksa_function, _ bytes: [UInt8], _ arena: inout ksa_arena) -> ([ksa_arg], Int32) {
    var out = blank()
    let rc = bytes.withUnsafeBufferPointer { p -> Int32 in
        var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
        return out.withUnsafeMutableBufferPointer { ksa_decode_request(fn(f), &r, $0.baseAddress, &arena) }
    }
    return (out, rc)
}

/// The mechanism as the agent rebuilds it from a C_SignInit. Its pointers may point into the
/// request, so they are read only in `look`, while the request lives (as during ksa_serve).
private func rebuilt(_ m: inout CK_MECHANISM, _ arena: inout ksa_arena,
                     _ look: (CK_MECHANISM) -> [UInt8] = { _ in [] }) -> (CK_RV, CK_MECHANISM?, [UInt8]) {
    withUnsafeMutablePointer(to: &m) { mp in
        var a = blank()
        a[0].ul = 1
        a[1].ptr = UnsafeMutableRawPointer(mp)
        a[2].ul = 2
        let (rv, bytes) = encode(KSA_FN_SignInit, &a)
        guard rv == CKR_OK else { return (rv, nil, []) }
        var out = blank()
        var arenaRC: Int32 = -1
        var seen: [UInt8] = []
        bytes.withUnsafeBufferPointer { p in
            var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
            arenaRC = out.withUnsafeMutableBufferPointer { ksa_decode_request(fn(KSA_FN_SignInit), &r, $0.baseAddress, &arena) }
            if arenaRC == 0, let mech = out[1].ptr?.assumingMemoryBound(to: CK_MECHANISM.self).pointee { seen = look(mech) }
        }
        guard arenaRC == 0 else { return (CKR_GENERAL_ERROR, nil, []) }
        return (rv, out[1].ptr?.assumingMemoryBound(to: CK_MECHANISM.self).pointee, seen)
    }
}

@Suite struct PQCodecTests {
    @Test func signAdditionalContextIsRebuiltInTheAgent() {
        let expected: [UInt8] = Array("keyshare-ctx".utf8)
        var ctx = expected
        ctx.withUnsafeMutableBufferPointer { c in
            var p = CK_SIGN_ADDITIONAL_CONTEXT(hedgeVariant: CK_HEDGE_TYPE(CKH_DETERMINISTIC_REQUIRED), pContext: c.baseAddress,
                                               ulContextLen: CK_ULONG(c.count))
            withUnsafeMutablePointer(to: &p) { pp in
                var arena = ksa_arena()
                defer { ksa_arena_free(&arena) }
                var m = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_ML_DSA), pParameter: UnsafeMutableRawPointer(pp),
                                     ulParameterLen: CK_ULONG(MemoryLayout<CK_SIGN_ADDITIONAL_CONTEXT>.size))
                let (rv, r, seen) = rebuilt(&m, &arena) { mech in
                    guard let p = mech.pParameter?.assumingMemoryBound(to: CK_SIGN_ADDITIONAL_CONTEXT.self).pointee,
                          let c = p.pContext else { return [] }
                    return Array(UnsafeBufferPointer(start: c, count: Int(p.ulContextLen)))
                }
                #expect(rv == CKR_OK)
                #expect(seen == expected)
                #expect(r?.ulParameterLen == CK_ULONG(MemoryLayout<CK_SIGN_ADDITIONAL_CONTEXT>.size))
                let s = r?.pParameter?.assumingMemoryBound(to: CK_SIGN_ADDITIONAL_CONTEXT.self).pointee
                #expect(s?.hedgeVariant == CK_HEDGE_TYPE(CKH_DETERMINISTIC_REQUIRED) && s?.ulContextLen == 12)
                #expect(s?.pContext != c.baseAddress)  // the agent's copy, not the client's address

                // The same struct under a hash-named mechanism.
                m.mechanism = CK_MECHANISM_TYPE(CKM_HASH_SLH_DSA_SHAKE256)
                #expect(rebuilt(&m, &arena).1?.pParameter != nil)
                // A 256-byte context crosses as NULL with its length: the module refuses it on the length.
                pp.pointee.ulContextLen = 256
                m.mechanism = CK_MECHANISM_TYPE(CKM_ML_DSA)
                let long = rebuilt(&m, &arena).1?.pParameter?.assumingMemoryBound(to: CK_SIGN_ADDITIONAL_CONTEXT.self).pointee
                #expect(long != nil && long?.pContext == nil && long?.ulContextLen == 256)
                // A wrong ulParameterLen crosses as zeros of that length (the module refuses the size).
                m.ulParameterLen -= 1
                let short = rebuilt(&m, &arena).1
                #expect(short != nil && short?.ulParameterLen == CK_ULONG(MemoryLayout<CK_SIGN_ADDITIONAL_CONTEXT>.size - 1))
            }
        }
    }

    @Test func hashSignAdditionalContextCarriesTheHash() {
        var p = CK_HASH_SIGN_ADDITIONAL_CONTEXT(hedgeVariant: CK_HEDGE_TYPE(CKH_HEDGE_REQUIRED), pContext: nil, ulContextLen: 0,
                                                hash: CK_MECHANISM_TYPE(CKM_SHA3_256))
        withUnsafeMutablePointer(to: &p) { pp in
            var arena = ksa_arena()
            defer { ksa_arena_free(&arena) }
            var m = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_HASH_ML_DSA), pParameter: UnsafeMutableRawPointer(pp),
                                 ulParameterLen: CK_ULONG(MemoryLayout<CK_HASH_SIGN_ADDITIONAL_CONTEXT>.size))
            let s = rebuilt(&m, &arena).1?.pParameter?.assumingMemoryBound(to: CK_HASH_SIGN_ADDITIONAL_CONTEXT.self).pointee
            #expect(s?.hash == CK_MECHANISM_TYPE(CKM_SHA3_256) && s?.hedgeVariant == CK_HEDGE_TYPE(CKH_HEDGE_REQUIRED))
            #expect(s?.pContext == nil && s?.ulContextLen == 0)
        }
    }

    /// A forged encoding: CK_SIGN_ADDITIONAL_CONTEXT's kind under CKM_HASH_ML_DSA (whose struct is the
    /// longer one) is refused by the agent, which would otherwise hand the module a short struct.
    @Test func mismatchedEncodingIsRefused() {
        var p = CK_SIGN_ADDITIONAL_CONTEXT(hedgeVariant: 0, pContext: nil, ulContextLen: 0)
        withUnsafeMutablePointer(to: &p) { pp in
            var m = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_ML_DSA), pParameter: UnsafeMutableRawPointer(pp),
                                 ulParameterLen: CK_ULONG(MemoryLayout<CK_SIGN_ADDITIONAL_CONTEXT>.size))
            withUnsafeMutablePointer(to: &m) { mp in
                var a = blank()
                a[1].ptr = UnsafeMutableRawPointer(mp)
                var (rv, bytes) = encode(KSA_FN_SignInit, &a)
                #expect(rv == CKR_OK)
                // Rewrite the mechanism type (after fn's u64 session and the present byte) to CKM_HASH_ML_DSA.
                let at = 8 + 1
                #expect(bytes[at] == UInt8(CKM_ML_DSA))
                bytes[at] = UInt8(CKM_HASH_ML_DSA)
                var arena = ksa_arena()
                defer { ksa_arena_free(&arena) }
                #expect(decode(KSA_FN_SignInit, bytes, &arena).1 == -1)
            }
        }
    }

    @Test func encapsulateKeyArgumentsAndOutputsCross() {
        var ct = [UInt8](repeating: 0xEE, count: 1100)
        var ctLen: CK_ULONG = 1100
        var handle: CK_OBJECT_HANDLE = 0
        var m = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_ML_KEM), pParameter: nil, ulParameterLen: 0)
        var vlen: CK_ULONG = 32
        withUnsafeMutablePointer(to: &vlen) { vp in
            var t = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE_LEN), pValue: UnsafeMutableRawPointer(vp),
                                  ulValueLen: CK_ULONG(MemoryLayout<CK_ULONG>.size))]
            ct.withUnsafeMutableBytes { cp in
                var a = blank()
                withUnsafeMutablePointer(to: &m) { mp in
                    t.withUnsafeMutableBufferPointer { tp in
                        a[0].ul = 5; a[1].ptr = UnsafeMutableRawPointer(mp); a[2].ul = 9
                        a[3].ptr = UnsafeMutableRawPointer(tp.baseAddress); a[3].len = 1
                        a[4].ptr = cp.baseAddress
                        withUnsafeMutablePointer(to: &ctLen) { a[4].plen = $0
                            withUnsafeMutablePointer(to: &handle) { hp in
                                a[5].plen = hp
                                let (rv, bytes) = encode(KSA_FN_EncapsulateKey, &a)
                                #expect(rv == CKR_OK)
                                var arena = ksa_arena()
                                defer { ksa_arena_free(&arena) }
                                var (server, rc) = decode(KSA_FN_EncapsulateKey, bytes, &arena)
                                #expect(rc == 0 && server[0].ul == 5 && server[2].ul == 9 && server[3].len == 1)
                                #expect(server[1].ptr?.assumingMemoryBound(to: CK_MECHANISM.self).pointee.mechanism == CK_MECHANISM_TYPE(CKM_ML_KEM))
                                #expect(server[4].plen?.pointee == 1100 && server[4].ptr != nil)
                                // The module writes a 1088-byte ciphertext and the new key's handle.
                                for i in 0..<1088 { server[4].ptr!.storeBytes(of: UInt8(i & 0xFF), toByteOffset: i, as: UInt8.self) }
                                server[4].plen!.pointee = 1088
                                server[5].plen!.pointee = 77
                                var rb = ksa_buf()
                                ksa_buf_init(&rb)
                                defer { ksa_buf_free(&rb) }
                                server.withUnsafeMutableBufferPointer { ksa_encode_reply(fn(KSA_FN_EncapsulateKey), $0.baseAddress, CKR_OK, &rb) }
                                let reply = Array(UnsafeBufferPointer(start: rb.data, count: rb.len))
                                let applied = reply.withUnsafeBufferPointer { p -> CK_RV in
                                    var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
                                    return a.withUnsafeMutableBufferPointer { ksa_apply_reply(fn(KSA_FN_EncapsulateKey), $0.baseAddress, &r) }
                                }
                                #expect(applied == CKR_OK)
                                #expect(hp.pointee == 77)
                            }
                        }
                    }
                }
            }
        }
        #expect(ctLen == 1088 && ct[1087] == UInt8(1087 & 0xFF) && ct[1088] == 0xEE)
    }

    @Test func decapsulateKeySignature() {
        #expect(String(cString: ksa_signature(fn(KSA_FN_DecapsulateKey))) == "uMuTIL")
        #expect(String(cString: ksa_signature(fn(KSA_FN_EncapsulateKey))) == "uMuTOL")
    }
}
