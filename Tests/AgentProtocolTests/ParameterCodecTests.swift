import AgentProtocol
import CPKCS11
import PKCS11
import Testing

// Round trips of the protocol-3 parameters (Sources/AgentProtocol/struct_params.c):
// the symmetric, EdDSA and RSA-AES mechanism parameters, and the message-based
// functions' per-message parameter, in and out.

private func fnID(_ f: ksa_function) -> UInt32 { UInt32(f.rawValue) }

private func encodeRequest(_ fn: ksa_function, _ args: inout [ksa_arg]) -> (CK_RV, [UInt8]) {
    var b = ksa_buf()
    ksa_buf_init(&b)
    defer { ksa_buf_free(&b) }
    let rv = args.withUnsafeMutableBufferPointer { ksa_encode_request(fnID(fn), $0.baseAddress, &b) }
    return (rv, b.len > 0 ? Array(UnsafeBufferPointer(start: b.data, count: b.len)) : [])
}

private func decodeRequest(_ fn: ksa_function, _ bytes: [UInt8], _ arena: inout ksa_arena) -> ([ksa_arg], Int32) {
    var out = [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS))
    let rc = bytes.withUnsafeBufferPointer { p -> Int32 in
        var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
        return out.withUnsafeMutableBufferPointer { ksa_decode_request(fnID(fn), &r, $0.baseAddress, &arena) }
    }
    return (out, rc)
}

private func encodeReply(_ fn: ksa_function, _ args: inout [ksa_arg], _ rv: CK_RV) -> [UInt8] {
    var b = ksa_buf()
    ksa_buf_init(&b)
    defer { ksa_buf_free(&b) }
    args.withUnsafeMutableBufferPointer { ksa_encode_reply(fnID(fn), $0.baseAddress, rv, &b) }
    return Array(UnsafeBufferPointer(start: b.data, count: b.len))
}

private func applyReply(_ fn: ksa_function, _ args: inout [ksa_arg], _ bytes: [UInt8]) -> CK_RV {
    bytes.withUnsafeBufferPointer { p in
        var r = ksa_rd(p: p.baseAddress, left: p.count, failed: 0)
        return args.withUnsafeMutableBufferPointer { ksa_apply_reply(fnID(fn), $0.baseAddress, &r) }
    }
}

/// Caller memory that outlives the closures: the tests hand its addresses to the codec.
private final class Memory {
    private var blocks: [UnsafeMutableRawPointer] = []
    deinit { blocks.forEach { $0.deallocate() } }
    func bytes(_ v: [UInt8]) -> UnsafeMutablePointer<UInt8> {
        let p = UnsafeMutableRawPointer.allocate(byteCount: max(v.count, 1), alignment: 16)
        blocks.append(p)
        let t = p.bindMemory(to: UInt8.self, capacity: max(v.count, 1))
        for (i, x) in v.enumerated() { t[i] = x }
        return t
    }
    func value<T>(_ v: T) -> UnsafeMutablePointer<T> {
        let p = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<T>.size, alignment: 16)
        blocks.append(p)
        let t = p.bindMemory(to: T.self, capacity: 1)
        t.initialize(to: v)
        return t
    }
}

private func read(_ p: UnsafeMutableRawPointer?, _ n: Int) -> [UInt8] {
    guard let p else { return [] }
    return Array(UnsafeRawBufferPointer(start: p, count: n))
}

private func args() -> [ksa_arg] { [ksa_arg](repeating: ksa_arg(), count: Int(KSA_MAX_ARGS)) }

/// A mechanism's parameter as the agent rebuilt it from an EncryptInit-shaped call.
private func rebuilt(_ fn: ksa_function, _ mech: UnsafeMutablePointer<CK_MECHANISM>, _ arena: inout ksa_arena) -> CK_MECHANISM? {
    var a = args()
    a[0].ul = 1
    a[1].ptr = UnsafeMutableRawPointer(mech)
    a[2].ul = 2
    let (rv, bytes) = encodeRequest(fn, &a)
    guard rv == CKR_OK else { return nil }
    let (server, rc) = decodeRequest(fn, bytes, &arena)
    guard rc == 0 else { return nil }
    return server[1].ptr?.assumingMemoryBound(to: CK_MECHANISM.self).pointee
}

@Suite struct ParameterCodecTests {
    @Test func chachaPolyEdDSAAndRSAAESParametersAreRebuilt() {
        let mem = Memory()
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }

        let nonce = Array(UInt8(1)...UInt8(12)), aad: [UInt8] = [7, 8, 9]
        let cp = mem.value(CK_SALSA20_CHACHA20_POLY1305_PARAMS(pNonce: mem.bytes(nonce), ulNonceLen: 12,
                                                               pAAD: mem.bytes(aad), ulAADLen: 3))
        let cm = mem.value(CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_CHACHA20_POLY1305), pParameter: UnsafeMutableRawPointer(cp),
                                        ulParameterLen: CK_ULONG(MemoryLayout<CK_SALSA20_CHACHA20_POLY1305_PARAMS>.size)))
        let c = rebuilt(KSA_FN_EncryptInit, cm, &arena)
        let cs = c?.pParameter?.assumingMemoryBound(to: CK_SALSA20_CHACHA20_POLY1305_PARAMS.self).pointee
        #expect(cs != nil && read(cs?.pNonce, 12) == nonce && read(cs?.pAAD, 3) == aad && cs?.ulAADLen == 3)
        #expect(cs?.pNonce != cp.pointee.pNonce)

        let ctx: [UInt8] = Array("context".utf8)
        let ep = mem.value(CK_EDDSA_PARAMS(phFlag: 1, ulContextDataLen: 7, pContextData: mem.bytes(ctx)))
        let em = mem.value(CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_EDDSA), pParameter: UnsafeMutableRawPointer(ep),
                                        ulParameterLen: CK_ULONG(MemoryLayout<CK_EDDSA_PARAMS>.size)))
        let es = rebuilt(KSA_FN_SignInit, em, &arena)?.pParameter?.assumingMemoryBound(to: CK_EDDSA_PARAMS.self).pointee
        #expect(es?.phFlag == 1 && es?.ulContextDataLen == 7 && read(es?.pContextData, 7) == ctx)

        let label: [UInt8] = [0x6c, 0x62, 0x6c]
        let oaep = mem.value(CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CK_MECHANISM_TYPE(CKM_SHA256), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256),
                                                     source: CK_RSA_PKCS_OAEP_SOURCE_TYPE(CKZ_DATA_SPECIFIED),
                                                     pSourceData: mem.bytes(label), ulSourceDataLen: 3))
        let rp = mem.value(CK_RSA_AES_KEY_WRAP_PARAMS(ulAESKeyBits: 256, pOAEPParams: oaep))
        let rm = mem.value(CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_RSA_AES_KEY_WRAP), pParameter: UnsafeMutableRawPointer(rp),
                                        ulParameterLen: CK_ULONG(MemoryLayout<CK_RSA_AES_KEY_WRAP_PARAMS>.size)))
        let rs = rebuilt(KSA_FN_EncryptInit, rm, &arena)?.pParameter?.assumingMemoryBound(to: CK_RSA_AES_KEY_WRAP_PARAMS.self).pointee
        let ro = rs?.pOAEPParams?.pointee
        #expect(rs?.ulAESKeyBits == 256 && ro?.hashAlg == CK_MECHANISM_TYPE(CKM_SHA256) && ro?.ulSourceDataLen == 3)
        #expect(read(ro?.pSourceData, 3) == label && rs?.pOAEPParams != oaep)

        // A NULL pOAEPParams crosses as NULL (the module refuses it, not the codec).
        rp.pointee.pOAEPParams = nil
        let rn = rebuilt(KSA_FN_EncryptInit, rm, &arena)?.pParameter?.assumingMemoryBound(to: CK_RSA_AES_KEY_WRAP_PARAMS.self).pointee
        #expect(rn != nil && rn?.pOAEPParams == nil)

        // Cofactor ECDH: CK_ECDH1_DERIVE_PARAMS, as CKM_ECDH1_DERIVE.
        let pub: [UInt8] = [4, 1, 2, 3]
        let dp = mem.value(CK_ECDH1_DERIVE_PARAMS(kdf: ck_ec_kdf_t(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                                  ulPublicDataLen: 4, pPublicData: mem.bytes(pub)))
        let dm = mem.value(CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_ECDH1_COFACTOR_DERIVE), pParameter: UnsafeMutableRawPointer(dp),
                                        ulParameterLen: CK_ULONG(MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size)))
        var d = args()
        d[1].ptr = UnsafeMutableRawPointer(dm)
        let (drv, dbytes) = encodeRequest(KSA_FN_DeriveKey, &d)
        #expect(drv == CKR_OK)
        let (ds, drc) = decodeRequest(KSA_FN_DeriveKey, dbytes, &arena)
        let dparam = ds[1].ptr?.assumingMemoryBound(to: CK_MECHANISM.self).pointee.pParameter?
            .assumingMemoryBound(to: CK_ECDH1_DERIVE_PARAMS.self).pointee
        #expect(drc == 0 && read(dparam?.pPublicData, 4) == pub)
    }

    @Test func ivAndMacLengthParametersCrossRaw() {
        for t in [CKM_AES_CTS, CKM_AES_CMAC_GENERAL, CKM_DES_CBC, CKM_DES_CBC_PAD, CKM_DES3_CBC, CKM_DES3_CBC_PAD,
                  CKM_SHA3_256_RSA_PKCS_PSS, CKM_AES_KEY_WRAP_PAD] {
            #expect(ksa_mechanism_param_is_raw(CK_MECHANISM_TYPE(t)) == 1, "mechanism 0x\(String(t, radix: 16))")
        }
        // CK_AES_CBC_ENCRYPT_DATA_PARAMS carries a data pointer: never raw.
        #expect(ksa_mechanism_param_is_raw(CK_MECHANISM_TYPE(CKM_AES_CBC_ENCRYPT_DATA)) == 0)
    }

    /// C_EncryptMessage with CK_GCM_MESSAGE_PARAMS: the IV crosses, the
    /// module's generated IV and tag come back into the caller's buffers,
    /// and only when the module wrote them.
    @Test func encryptMessageWritesBackTheGeneratedIVAndTheTag() {
        let mem = Memory()
        let iv = mem.bytes([UInt8](repeating: 0x11, count: 12))
        let tag = mem.bytes([UInt8](repeating: 0xEE, count: 16))
        let params = mem.value(CK_GCM_MESSAGE_PARAMS(pIv: iv, ulIvLen: 12, ulIvFixedBits: 32,
                                                     ivGenerator: CK_GENERATOR_FUNCTION(CKG_GENERATE_RANDOM), pTag: tag, ulTagBits: 128))
        let aad = mem.bytes([1, 2]), pt = mem.bytes([3, 4, 5, 6, 7])
        let out = mem.bytes([UInt8](repeating: 0, count: 32)), outLen = mem.value(CK_ULONG(32))
        func call() -> [ksa_arg] {
            var a = args()
            a[0].ul = 9
            a[1].ptr = UnsafeMutableRawPointer(params); a[1].len = CK_ULONG(MemoryLayout<CK_GCM_MESSAGE_PARAMS>.size)
            a[2].ptr = UnsafeMutableRawPointer(aad); a[2].len = 2
            a[3].ptr = UnsafeMutableRawPointer(pt); a[3].len = 5
            a[4].ptr = UnsafeMutableRawPointer(out); a[4].plen = outLen
            return a
        }

        // 1. A length query: the module writes neither IV nor tag, so nothing is written.
        var q = call()
        q[4].ptr = nil
        var (rv, bytes) = encodeRequest(KSA_FN_EncryptMessage, &q)
        #expect(rv == CKR_OK)
        var arena = ksa_arena()
        var (server, rc) = decodeRequest(KSA_FN_EncryptMessage, bytes, &arena)
        #expect(rc == 0 && server[4].ptr == nil)
        // (Guards, not force-unwraps: on a codec that drops the parameter the test fails, not the process.)
        guard rc == 0, let sp0 = server[1].ptr, server[4].plen != nil else {
            Issue.record("the message parameter or the output length did not cross")
            ksa_arena_free(&arena)
            return
        }
        let sp = sp0.assumingMemoryBound(to: CK_GCM_MESSAGE_PARAMS.self)
        #expect(server[1].len == CK_ULONG(MemoryLayout<CK_GCM_MESSAGE_PARAMS>.size))
        #expect(read(sp.pointee.pIv, 12) == [UInt8](repeating: 0x11, count: 12) && sp.pointee.pIv != iv)
        #expect(sp.pointee.ulIvFixedBits == 32 && sp.pointee.ivGenerator == CK_GENERATOR_FUNCTION(CKG_GENERATE_RANDOM))
        // Encryption: the tag is only an output; the caller's buffer contents do not cross.
        #expect(sp.pointee.pTag != nil && read(sp.pointee.pTag, 16) == [UInt8](repeating: 0, count: 16))
        server[4].plen!.pointee = 21
        #expect(applyReply(KSA_FN_EncryptMessage, &q, encodeReply(KSA_FN_EncryptMessage, &server, CKR_OK)) == CKR_OK)
        #expect(outLen.pointee == 21)
        #expect(read(iv, 12) == [UInt8](repeating: 0x11, count: 12) && read(tag, 16) == [UInt8](repeating: 0xEE, count: 16))
        ksa_arena_free(&arena)

        // 2. CKR_BUFFER_TOO_SMALL: the needed length, no bytes.
        outLen.pointee = 4
        var small = call()
        (rv, bytes) = encodeRequest(KSA_FN_EncryptMessage, &small)
        (server, rc) = decodeRequest(KSA_FN_EncryptMessage, bytes, &arena)
        server[4].plen!.pointee = 21
        #expect(applyReply(KSA_FN_EncryptMessage, &small, encodeReply(KSA_FN_EncryptMessage, &server, CKR_BUFFER_TOO_SMALL))
                == CKR_BUFFER_TOO_SMALL)
        #expect(outLen.pointee == 21 && read(out, 4) == [0, 0, 0, 0])
        ksa_arena_free(&arena)

        // 3. The real call: the module generates the IV's random part and writes the tag.
        outLen.pointee = 32
        var a = call()
        (rv, bytes) = encodeRequest(KSA_FN_EncryptMessage, &a)
        (server, rc) = decodeRequest(KSA_FN_EncryptMessage, bytes, &arena)
        #expect(rc == 0)
        guard rc == 0, let s0 = server[1].ptr, let outp = server[4].ptr else {
            Issue.record("the message call did not cross")
            ksa_arena_free(&arena)
            return
        }
        let s = s0.assumingMemoryBound(to: CK_GCM_MESSAGE_PARAMS.self).pointee
        let newIV: [UInt8] = [0x11, 0x11, 0x11, 0x11] + Array(UInt8(0xA0)..<UInt8(0xA8))
        for (i, x) in newIV.enumerated() { s.pIv[i] = x }
        for i in 0..<16 { s.pTag[i] = 0x5A }
        for i in 0..<5 { outp.storeBytes(of: UInt8(0xC0 + i), toByteOffset: i, as: UInt8.self) }
        server[4].plen!.pointee = 5
        #expect(applyReply(KSA_FN_EncryptMessage, &a, encodeReply(KSA_FN_EncryptMessage, &server, CKR_OK)) == CKR_OK)
        #expect(read(iv, 12) == newIV)
        #expect(read(tag, 16) == [UInt8](repeating: 0x5A, count: 16))
        #expect(outLen.pointee == 5 && read(out, 5) == [0xC0, 0xC1, 0xC2, 0xC3, 0xC4])
        ksa_arena_free(&arena)
    }

    /// A reply naming an IV or tag of another length than the caller's is
    /// malformed: refused with nothing written (validated before any write).
    @Test func messageReplyOfTheWrongLengthWritesNothing() {
        let mem = Memory()
        let iv = mem.bytes([UInt8](repeating: 0x11, count: 12)), tag = mem.bytes([UInt8](repeating: 0xEE, count: 16))
        let params = mem.value(CK_GCM_MESSAGE_PARAMS(pIv: iv, ulIvLen: 12, ulIvFixedBits: 0,
                                                     ivGenerator: CK_GENERATOR_FUNCTION(CKG_GENERATE_RANDOM), pTag: tag, ulTagBits: 96))
        var a = args()
        a[1].ptr = UnsafeMutableRawPointer(params); a[1].len = CK_ULONG(MemoryLayout<CK_GCM_MESSAGE_PARAMS>.size)
        #expect(encodeRequest(KSA_FN_EncryptMessageBegin, &a).0 == CKR_OK)
        var b = ksa_buf()
        ksa_buf_init(&b)
        ksa_put_u64(&b, UInt64(CKR_OK)); ksa_put_u8(&b, 1)
        ksa_put_u8(&b, UInt8(PARAM_GCM_MSG_WIRE))
        ksa_put_u8(&b, 1); ksa_put_u32(&b, 12)                       // a good IV
        let ivBytes = [UInt8](repeating: 0x99, count: 12)
        ivBytes.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, 12) }
        ksa_put_u8(&b, 1); ksa_put_u32(&b, 16)                       // 16 tag bytes for a 96-bit tag
        ivBytes.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, 12) }
        ivBytes.withUnsafeBytes { ksa_put_raw(&b, $0.baseAddress, 4) }
        let bytes = Array(UnsafeBufferPointer(start: b.data, count: b.len))
        ksa_buf_free(&b)
        #expect(applyReply(KSA_FN_EncryptMessageBegin, &a, bytes) == CKR_DEVICE_ERROR)
        #expect(read(iv, 12) == [UInt8](repeating: 0x11, count: 12) && read(tag, 16) == [UInt8](repeating: 0xEE, count: 16))
    }

    /// Decryption: the tag is an input and crosses; ChaCha20-Poly1305's
    /// 24-byte struct is told apart from GCM's by its size.
    @Test func decryptMessageSendsTheTag() {
        let mem = Memory()
        let nonce = mem.bytes(Array(UInt8(1)...UInt8(12))), tag = mem.bytes([UInt8](repeating: 0x77, count: 16))
        let params = mem.value(CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS(pNonce: nonce, ulNonceLen: 12, pTag: tag))
        var a = args()
        a[1].ptr = UnsafeMutableRawPointer(params)
        a[1].len = CK_ULONG(MemoryLayout<CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS>.size)
        let (rv, bytes) = encodeRequest(KSA_FN_DecryptMessageBegin, &a)
        #expect(rv == CKR_OK)
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }
        var (server, rc) = decodeRequest(KSA_FN_DecryptMessageBegin, bytes, &arena)
        #expect(rc == 0 && server[1].len == 24)
        guard rc == 0, let s0 = server[1].ptr, server[1].len == 24 else {
            Issue.record("the message parameter did not cross")
            return
        }
        let s = s0.assumingMemoryBound(to: CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS.self).pointee
        #expect(read(s.pNonce, 12) == Array(UInt8(1)...UInt8(12)) && read(s.pTag, 16) == [UInt8](repeating: 0x77, count: 16))
        // The module wrote nothing: the caller's (perhaps read-only) buffers are left alone.
        #expect(applyReply(KSA_FN_DecryptMessageBegin, &a, encodeReply(KSA_FN_DecryptMessageBegin, &server, CKR_OK)) == CKR_OK)
        #expect(read(tag, 16) == [UInt8](repeating: 0x77, count: 16))
    }

    /// C_MessageEncryptInit's GCM parameter is a CK_GCM_MESSAGE_PARAMS (48
    /// bytes, as CK_GCM_PARAMS): the same bytes must never reach C_EncryptInit,
    /// where the module would read them as a CK_GCM_PARAMS.
    @Test func messageStructIsRefusedOutsideAMessageInit() {
        let mem = Memory()
        let params = mem.value(CK_GCM_MESSAGE_PARAMS(pIv: mem.bytes([UInt8](repeating: 1, count: 12)), ulIvLen: 12, ulIvFixedBits: 0,
                                                     ivGenerator: CK_GENERATOR_FUNCTION(CKG_NO_GENERATE),
                                                     pTag: mem.bytes([UInt8](repeating: 0, count: 16)), ulTagBits: 128))
        let m = mem.value(CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_GCM), pParameter: UnsafeMutableRawPointer(params),
                                       ulParameterLen: CK_ULONG(MemoryLayout<CK_GCM_MESSAGE_PARAMS>.size)))
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }
        let init_ = rebuilt(KSA_FN_MessageEncryptInit, m, &arena)
        #expect(init_?.ulParameterLen == CK_ULONG(MemoryLayout<CK_GCM_MESSAGE_PARAMS>.size))
        #expect(init_?.pParameter?.assumingMemoryBound(to: CK_GCM_MESSAGE_PARAMS.self).pointee.ulTagBits == 128)
        // Encoded for C_MessageEncryptInit ("uNu"), decoded as C_EncryptInit ("uMu"): refused.
        var a = args()
        a[1].ptr = UnsafeMutableRawPointer(m)
        let (_, bytes) = encodeRequest(KSA_FN_MessageEncryptInit, &a)
        let (_, rc) = decodeRequest(KSA_FN_EncryptInit, bytes, &arena)
        #expect(rc == -1)
    }

    /// Message signing's parameter is opaque: its size crosses as zeros, its
    /// bytes are never read as a struct (0xFF pointers would crash the client).
    @Test func signMessageParameterIsOpaque() {
        let mem = Memory()
        let junk = mem.bytes([UInt8](repeating: 0xFF, count: 48))
        var a = args()
        a[1].ptr = UnsafeMutableRawPointer(junk); a[1].len = 48
        let (rv, bytes) = encodeRequest(KSA_FN_SignMessageBegin, &a)
        #expect(rv == CKR_OK)
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }
        var (server, rc) = decodeRequest(KSA_FN_SignMessageBegin, bytes, &arena)
        #expect(rc == 0 && server[1].len == 48 && read(server[1].ptr, 48) == [UInt8](repeating: 0, count: 48))
        #expect(applyReply(KSA_FN_SignMessageBegin, &a, encodeReply(KSA_FN_SignMessageBegin, &server, CKR_FUNCTION_NOT_SUPPORTED))
                == CKR_FUNCTION_NOT_SUPPORTED)
    }

    /// A per-message parameter longer than any struct (a caller's wrong
    /// length) still reaches the module, as NULL with its length, so the
    /// module answers it (and ends the message in progress) as in-process;
    /// the client reads none of it.
    @Test func overlongMessageParameterCrossesAsNullWithItsLength() {
        let mem = Memory()
        let junk = mem.bytes([UInt8](repeating: 0xFF, count: 16))
        var a = args()
        a[1].ptr = UnsafeMutableRawPointer(junk); a[1].len = 1 << 20
        let (rv, bytes) = encodeRequest(KSA_FN_EncryptMessageNext, &a)
        #expect(rv == CKR_OK && bytes.count < 128)
        var arena = ksa_arena()
        defer { ksa_arena_free(&arena) }
        let (server, rc) = decodeRequest(KSA_FN_EncryptMessageNext, bytes, &arena)
        #expect(rc == 0 && server[1].ptr == nil && server[1].len == 1 << 20)
    }

    /// Every mechanism C_GetMechanismList offers whose parameter the module
    /// reads has a way across: the module's decoder says which mechanisms
    /// take a parameter (it refuses an empty one, or accepts some
    /// zero-filled one), and the codec must then carry a zero-filled
    /// parameter of some size (a struct of its size, or raw bytes).
    @Test func everyOfferedMechanismsParameterCrosses() {
        func decoderAccepts(_ t: CK_MECHANISM_TYPE, _ p: [UInt8]) -> Bool {
            p.withUnsafeBytes { (try? Mechanism(type: t, parameter: p.isEmpty ? nil : $0)) != nil }
        }
        func crosses(_ t: CK_MECHANISM_TYPE, _ size: Int, _ fn: ksa_function) -> Bool {
            let mem = Memory()
            let m = mem.value(CK_MECHANISM(mechanism: t, pParameter: UnsafeMutableRawPointer(mem.bytes([UInt8](repeating: 0, count: size))),
                                           ulParameterLen: CK_ULONG(size)))
            var arena = ksa_arena()
            defer { ksa_arena_free(&arena) }
            return rebuilt(fn, m, &arena) != nil
        }
        var missing: [String] = []
        var checked = 0
        for (t, info) in MechanismCatalog.entries {
            let takesParameter = !decoderAccepts(t, []) || (1...128).contains { decoderAccepts(t, [UInt8](repeating: 0, count: $0)) }
            if takesParameter {
                checked += 1
                if !(1...128).contains(where: { crosses(t, $0, KSA_FN_EncryptInit) }) { missing.append("0x" + String(t, radix: 16)) }
            }
            if info.flags & CK_FLAGS(CKF_MESSAGE_ENCRYPT) != 0,
               !(1...128).contains(where: { crosses(t, $0, KSA_FN_MessageEncryptInit) }) {
                missing.append("0x" + String(t, radix: 16) + " (message)")
            }
        }
        #expect(checked >= 30)
        #expect(missing.isEmpty, "parameters that do not cross: \(missing)")
    }
}

/// PARAM_GCM_MSG's value on the wire (codec_internal.h is not public).
private let PARAM_GCM_MSG_WIRE = 13
