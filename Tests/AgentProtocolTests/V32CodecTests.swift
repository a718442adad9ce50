import AgentProtocol
import CPKCS11
import Testing

/// The PKCS #11 3.2 calls on the wire (issue 18; Sources/AgentProtocol/v32_params.c): the
/// signature of C_VerifySignatureInit and the associated data of the authenticated wraps
/// cross as the agent's own copies, outputs come back only into the caller's buffers, every
/// truncation is refused, and a process that registered no 3.2 functions answers them
/// CKR_FUNCTION_NOT_SUPPORTED (as an agent older than 3.2).
extension CodecTests {
    private func fn(_ f: ksa_function) -> UInt32 { UInt32(f.rawValue) }

    /// Every prefix and one byte more of a request are malformed.
    private func refusesTruncation(_ f: UInt32, _ bytes: [UInt8]) {
        for cut in 0..<bytes.count {
            var a = ksa_arena()
            let (_, rc) = decode(f, Array(bytes.prefix(cut)), &a)
            #expect(rc == -1, "prefix \(cut) of \(bytes.count) accepted")
            ksa_arena_free(&a)
        }
        var a = ksa_arena()
        let (_, rc) = decode(f, bytes + [0], &a)
        #expect(rc == -1)
        ksa_arena_free(&a)
    }

    @Test func verifySignatureInitCarriesTheSignature() {
        var sig = [UInt8](repeating: 0x5A, count: 70)
        var mech = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_ECDSA_SHA256), pParameter: nil, ulParameterLen: 0)
        sig.withUnsafeMutableBytes { s in
            withUnsafeMutablePointer(to: &mech) { mp in
                var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                args[0].ul = 5
                args[1].ptr = UnsafeMutableRawPointer(mp)
                args[2].ul = 9
                args[3].ptr = s.baseAddress; args[3].len = 70
                let f = fn(KSA_FN_VerifySignatureInit)
                let (rv, bytes) = request(f, &args)
                #expect(rv == CKR_OK)
                var arena = ksa_arena()
                let (server, rc) = decode(f, bytes, &arena)
                #expect(rc == 0)
                #expect(server[0].ul == 5 && server[2].ul == 9 && server[3].len == 70)
                #expect(Array(UnsafeRawBufferPointer(start: server[3].ptr, count: 70)) == [UInt8](repeating: 0x5A, count: 70))
                #expect(server[3].ptr != s.baseAddress)
                let m = server[1].ptr!.assumingMemoryBound(to: CK_MECHANISM.self).pointee
                #expect(m.mechanism == CK_MECHANISM_TYPE(CKM_ECDSA_SHA256))
                ksa_arena_free(&arena)
                refusesTruncation(f, bytes)
                // A NULL signature with a length crosses as NULL with the length (the module answers
                // CKR_ARGUMENTS_BAD), never as bytes read from NULL.
                args[3].ptr = nil
                let (rv2, bytes2) = request(f, &args)
                #expect(rv2 == CKR_OK)
                var a2 = ksa_arena()
                let (s2, rc2) = decode(f, bytes2, &a2)
                #expect(rc2 == 0 && s2[3].ptr == nil && s2[3].len == 70)
                ksa_arena_free(&a2)
            }
        }
    }

    @Test func unwrapKeyAuthenticatedRoundTrip() {
        var wrapped = [UInt8](repeating: 0xC3, count: 32)
        var ad: [UInt8] = Array("key-id=42".utf8)
        var iv = [UInt8](repeating: 7, count: 12)
        var handle: CK_ULONG = 0
        var cls = CK_OBJECT_CLASS(CKO_SECRET_KEY)
        wrapped.withUnsafeMutableBytes { w in
            ad.withUnsafeMutableBytes { a in
                iv.withUnsafeMutableBufferPointer { ivp in
                    withUnsafeMutablePointer(to: &cls) { cp in
                        var tmpl = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: UnsafeMutableRawPointer(cp),
                                                 ulValueLen: CK_ULONG(MemoryLayout<CK_OBJECT_CLASS>.size))]
                        var gcm = CK_GCM_PARAMS()
                        gcm.pIv = ivp.baseAddress; gcm.ulIvLen = 12; gcm.ulIvBits = 96; gcm.ulTagBits = 128
                        withUnsafeMutablePointer(to: &gcm) { gp in
                            var mech = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM), pParameter: UnsafeMutableRawPointer(gp),
                                                    ulParameterLen: CK_ULONG(MemoryLayout<CK_GCM_PARAMS>.size))
                            withUnsafeMutablePointer(to: &mech) { mp in
                                tmpl.withUnsafeMutableBufferPointer { tp in
                                    withUnsafeMutablePointer(to: &handle) { hp in
                                        var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                                        args[0].ul = 3
                                        args[1].ptr = UnsafeMutableRawPointer(mp)
                                        args[2].ul = 11
                                        args[3].ptr = w.baseAddress; args[3].len = 32
                                        args[4].ptr = UnsafeMutableRawPointer(tp.baseAddress); args[4].len = 1
                                        args[5].ptr = a.baseAddress; args[5].len = CK_ULONG(a.count)
                                        args[6].plen = hp
                                        let f = fn(KSA_FN_UnwrapKeyAuthenticated)
                                        let (rv, bytes) = request(f, &args)
                                        #expect(rv == CKR_OK)
                                        var arena = ksa_arena()
                                        var (server, rc) = decode(f, bytes, &arena)
                                        #expect(rc == 0)
                                        #expect(server[3].len == 32 && server[4].len == 1 && server[5].len == CK_ULONG(a.count))
                                        #expect(Array(UnsafeRawBufferPointer(start: server[5].ptr, count: a.count)) == Array("key-id=42".utf8))
                                        let p = server[1].ptr!.assumingMemoryBound(to: CK_MECHANISM.self).pointee
                                            .pParameter!.assumingMemoryBound(to: CK_GCM_PARAMS.self).pointee
                                        #expect(p.ulIvLen == 12 && p.ulAADLen == 0 && p.ulTagBits == 128)
                                        server[6].plen!.pointee = 0x77
                                        let out = reply(f, &server, CKR_OK)
                                        ksa_arena_free(&arena)
                                        #expect(apply(f, &args, out) == CKR_OK)
                                        #expect(hp.pointee == 0x77)
                                        refusesTruncation(f, bytes)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    @Test func validationFlagsAndWrapAuthenticatedOutputs() {
        var flags: CK_ULONG = 0xDEAD
        withUnsafeMutablePointer(to: &flags) { fp in
            var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
            args[0].ul = 4; args[1].ul = 1; args[2].plen = fp
            let f = fn(KSA_FN_GetSessionValidationFlags)
            let (_, bytes) = request(f, &args)
            var arena = ksa_arena()
            var (server, rc) = decode(f, bytes, &arena)
            #expect(rc == 0 && server[1].ul == 1 && server[2].plen != nil)
            server[2].plen!.pointee = 0
            let out = reply(f, &server, CKR_OK)
            ksa_arena_free(&arena)
            #expect(apply(f, &args, out) == CKR_OK)
            #expect(fp.pointee == 0)
        }
        // C_WrapKeyAuthenticated's output: a reply longer than the caller's buffer writes nothing.
        var blob = [UInt8](repeating: 0xEE, count: 8)
        var blobLen: CK_ULONG = 8
        var mech = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_KEY_WRAP), pParameter: nil, ulParameterLen: 0)
        blob.withUnsafeMutableBytes { b in
            withUnsafeMutablePointer(to: &blobLen) { bl in
                withUnsafeMutablePointer(to: &mech) { mp in
                    var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
                    args[0].ul = 4; args[1].ptr = UnsafeMutableRawPointer(mp); args[2].ul = 5; args[3].ul = 6
                    args[4].ptr = nil; args[4].len = 0
                    args[5].ptr = b.baseAddress; args[5].plen = bl
                    let f = fn(KSA_FN_WrapKeyAuthenticated)
                    let (_, bytes) = request(f, &args)
                    var arena = ksa_arena()
                    var (server, rc) = decode(f, bytes, &arena)
                    #expect(rc == 0 && server[5].plen?.pointee == 8)
                    // A module result longer than the buffer: the length comes back, no bytes.
                    server[5].plen!.pointee = 40
                    let short = reply(f, &server, CKR_BUFFER_TOO_SMALL)
                    #expect(apply(f, &args, short) == CKR_BUFFER_TOO_SMALL)
                    #expect(bl.pointee == 40 && Array(b) == [UInt8](repeating: 0xEE, count: 8))
                    // A hostile agent sends 40 bytes for the caller's 8-byte buffer: refused, nothing written.
                    bl.pointee = 8
                    var big = [UInt8](repeating: 0x11, count: 40)
                    big.withUnsafeMutableBytes { g in
                        server[5].ptr = g.baseAddress; server[5].cap = 40
                        let out = reply(f, &server, CKR_OK)
                        #expect(apply(f, &args, out) == CKR_DEVICE_ERROR)
                    }
                    ksa_arena_free(&arena)
                    #expect(Array(b) == [UInt8](repeating: 0xEE, count: 8))
                }
            }
        }
    }

    @Test func unregisteredV32CallsAreNotSupported() {
        for f in [KSA_FN_VerifySignatureInit, KSA_FN_VerifySignature, KSA_FN_VerifySignatureUpdate,
                  KSA_FN_VerifySignatureFinal, KSA_FN_GetSessionValidationFlags, KSA_FN_WrapKeyAuthenticated,
                  KSA_FN_UnwrapKeyAuthenticated] {
            #expect(ksa_signature(fn(f)) != nil)
            var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
            #expect(args.withUnsafeMutableBufferPointer { ksa_call_3_2(fn(f), $0.baseAddress) } == CKR_FUNCTION_NOT_SUPPORTED)
        }
        var args = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
        #expect(args.withUnsafeMutableBufferPointer { ksa_call_3_2(fn(KSA_FN_Sign), $0.baseAddress) } == CKR_FUNCTION_NOT_SUPPORTED)
    }
}
