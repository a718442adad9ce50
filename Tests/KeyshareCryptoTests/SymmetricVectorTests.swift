import Testing
import KeyshareCrypto

/// Published known-answer vectors for the symmetric primitives behind the
/// PKCS #11 mechanisms of issue 13 (AESModes, CMAC, DES, ChaCha20-Poly1305,
/// AES key wrap with an alternative IV). Each vector names its source.
@Suite struct SymmetricVectorTests {
    // NIST SP 800-38A Appendix F: the shared plaintext and keys.
    static let plaintext = Hex.decode("""
        6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
        30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710
        """)
    static let key128 = Hex.decode("2b7e151628aed2a6abf7158809cf4f3c")
    static let key192 = Hex.decode("8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b")
    static let key256 = Hex.decode("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")

    static func run(_ ctx: CipherContext, _ data: [UInt8], parts: Int = 1) throws -> [UInt8] {
        var out: [UInt8] = []
        let step = Swift.max(1, (data.count + parts - 1) / parts)
        var i = 0
        while i < data.count {
            out += try ctx.update(Array(data[i..<Swift.min(data.count, i + step)]))
            i += step
        }
        return out + (try ctx.finish())
    }

    /// SP 800-38A F.1.1, F.1.3, F.1.5 (ECB-AES128/192/256), both directions, one part and three.
    @Test(arguments: [
        (key128, "3ad77bb40d7a3660a89ecaf32466ef97f5d3d58503b9699de785895a96fdbaaf43b1cd7f598ece23881b00e3ed0306887b0c785e27e8ad3f8223207104725dd4"),
        (key192, "bd334f1d6e45f25ff712a214571fa5cc974104846d0ad3ad7734ecb3ecee4eefef7afd2270e2e60adce0ba2face6444e9a4b41ba738d6c72fb16691603c18e0e"),
        (key256, "f3eed1bdb5d2a03c064b5a7e3db181f8591ccb10d410ed26dc5ba74a31362870b6ed21b99ca6f4f9f153e7b1beafed1d23304b7a39f9f3ff067d8d8f9e24ecc7"),
    ])
    func ecb(_ key: [UInt8], _ expected: String) throws {
        #expect(Hex.encode(try Self.run(try AESMode.ecb.context(key: key, iv: nil, encrypt: true), Self.plaintext)) == expected)
        #expect(Hex.encode(try Self.run(try AESMode.ecb.context(key: key, iv: nil, encrypt: true), Self.plaintext, parts: 3))
                == expected)
        #expect(try Self.run(try AESMode.ecb.context(key: key, iv: nil, encrypt: false), Hex.decode(expected)) == Self.plaintext)
    }

    /// SP 800-38A F.5.1, F.5.3, F.5.5 (CTR-AES128/192/256): counter block f0f1...feff.
    @Test(arguments: [
        (key128, "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee"),
        (key192, "1abc932417521ca24f2b0459fe7e6e0b090339ec0aa6faefd5ccc2c6f4ce8e941e36b26bd1ebc670d1bd1d665620abf74f78a7f6d29809585a97daec58c6b050"),
        (key256, "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c52b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6"),
    ])
    func ctr(_ key: [UInt8], _ expected: String) throws {
        let cb = Hex.decode("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
        #expect(Hex.encode(try Self.run(try AESMode.ctr.context(key: key, iv: cb, encrypt: true), Self.plaintext)) == expected)
        // Odd part sizes: CTR is a stream, so every part comes back whole.
        #expect(Hex.encode(try Self.run(try AESMode.ctr.context(key: key, iv: cb, encrypt: true), Self.plaintext, parts: 5))
                == expected)
        #expect(try Self.run(try AESMode.ctr.context(key: key, iv: cb, encrypt: false), Hex.decode(expected)) == Self.plaintext)
    }

    /// The CTR counter-field limit (SoftHSM2's and Kryoptic's rule).
    @Test func ctrLimit() {
        let cb = [UInt8](repeating: 0, count: 15) + [0xFE]
        #expect(AESCounter.byteLimit(counterBlock: cb, counterBits: 8) == 2 * 16)  // 0xFE and 0xFF left
        #expect(AESCounter.byteLimit(counterBlock: cb, counterBits: 1) == 2 * 16)  // low bit 0: 0 and 1 left
        #expect(AESCounter.byteLimit(counterBlock: [UInt8](repeating: 0xFF, count: 16), counterBits: 128) == 16)
        #expect(AESCounter.byteLimit(counterBlock: [UInt8](repeating: 0, count: 16), counterBits: 128) == nil)
        #expect(AESCounter.byteLimit(counterBlock: [UInt8](repeating: 0, count: 16), counterBits: 32) == (1 << 32) * 16)
        #expect(AESCounter.byteLimit(counterBlock: cb, counterBits: 0) == 0)
        #expect(AESCounter.byteLimit(counterBlock: cb, counterBits: 129) == 0)
    }

    /// RFC 3962 Appendix B (AES-128, IV 0): those vectors are CS3 (the last
    /// two blocks always swapped). CS1, which CKM_AES_CTS uses, keeps them in
    /// order, so each vector's last full block and its final part are put back.
    @Test func ctsCS1() throws {
        let key = Hex.decode("636869636b656e207465726979616b69")
        let text = Array("I would like the General Gau's Chicken, please, and wonton soup.".utf8)
        let cs3: [(Int, String)] = [
            (17, "c6353568f2bf8cb4d8a580362da7ff7f97"),
            (31, "fc00783e0efdb2c1d445d4c8eff7ed2297687268d6ecccc0c07b25e25ecfe5"),
            (32, "39312523a78662d5be7fcbcc98ebf5a897687268d6ecccc0c07b25e25ecfe584"),
            (47, "97687268d6ecccc0c07b25e25ecfe584b3fffd940c16a18c1b5549d2f838029e39312523a78662d5be7fcbcc98ebf5"),
            (48, "97687268d6ecccc0c07b25e25ecfe5849dad8bbb96c4cdc03bc103e1a194bbd839312523a78662d5be7fcbcc98ebf5a8"),
            (64, "97687268d6ecccc0c07b25e25ecfe58439312523a78662d5be7fcbcc98ebf5a84807efe836ee89a526730dbc2f7bc8409dad8bbb96c4cdc03bc103e1a194bbd8"),
        ]
        let iv = [UInt8](repeating: 0, count: 16)
        for (n, v) in cs3 {
            let c3 = Hex.decode(v)
            let d = n % 16 == 0 ? 16 : n % 16
            let head = Array(c3[..<(n - 16 - d)]), full = Array(c3[(n - 16 - d)..<(n - d)]), last = Array(c3[(n - d)...])
            let cs1 = head + last + full
            let pt = Array(text[..<n])
            #expect(try Self.run(try AESMode.cbcCTS.context(key: key, iv: iv, encrypt: true), pt) == cs1, "CS1 \(n) bytes")
            #expect(try Self.run(try AESMode.cbcCTS.context(key: key, iv: iv, encrypt: false), cs1) == pt)
        }
    }

    /// RFC 4493 §4 (AES-128) and SP 800-38B Appendix D.2 / D.3 (AES-192, AES-256),
    /// through MACContext (CKM_AES_CMAC's and the SP 800-108 PRF's MAC).
    @Test(arguments: [
        (key128, ["bb1d6929e95937287fa37d129b756746", "070a16b46b4d4144f79bdd9dd04a287c",
                  "dfa66747de9ae63030ca32611497c827", "51f0bebf7e3b9d92fc49741779363cfe"]),
        (key192, ["d17ddf46adaacde531cac483de7a9367", "9e99a7bf31e710900662f65e617c5184",
                  "8a1de5be2eb31aad089a82e6ee908b0e", "a1d5df0eed790f794d77589659f39a11"]),
        (key256, ["028962f61b7bf89efc6b551f4667d983", "28a7023f452e8f82bd4bf28d8c37c35c",
                  "aaf3d8f1de5640c232f5b169b9c911e6", "e1992190549f6ed5696a2c056c315410"]),
    ])
    func cmac(_ key: [UInt8], _ macs: [String]) throws {
        for (len, mac) in zip([0, 16, 40, 64], macs) {
            let m = Array(Self.plaintext[..<len])
            let one = try MACContext(.cmacAES, key: key)
            try one.update(m)
            #expect(Hex.encode(try one.finish()) == mac, "\(len) bytes")
            let ctx = try MACContext(.cmacAES, key: key)
            for b in m { try ctx.update([b]) }
            #expect(Hex.encode(try ctx.finish()) == mac)
        }
        #expect(throws: CryptoError.self) { try MACContext(.cmacAES, key: [1, 2, 3]) }
    }

    /// SP 800-67 Rev. 2 Appendix B (TDEA ECB, with the standard's "qufck"),
    /// and the FIPS 81 DES examples (ECB Table B1, CBC Table C1) through
    /// OpenSSL's legacy provider in keyshare's own library context.
    @Test func desAndTripleDES() throws {
        let k3 = Hex.decode("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
        let p3 = Array("The qufck brown fox jump".utf8)
        let c3 = try Self.run(try DES.context(.tripleDES, .ecb, key: k3, iv: nil, encrypt: true, padding: false), p3)
        #expect(Hex.encode(c3) == "a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900")
        #expect(try Self.run(try DES.context(.tripleDES, .ecb, key: k3, iv: nil, encrypt: false, padding: false), c3) == p3)

        let k = Hex.decode("0123456789abcdef"), iv = Hex.decode("1234567890abcdef")
        let p = Array("Now is the time for all ".utf8)
        let ecb = try Self.run(try DES.context(.des, .ecb, key: k, iv: nil, encrypt: true, padding: false), Array(p[..<8]))
        #expect(Hex.encode(ecb) == "3fa40e8a984d4815")
        let cbc = try Self.run(try DES.context(.des, .cbc, key: k, iv: iv, encrypt: true, padding: false), p, parts: 3)
        #expect(Hex.encode(cbc) == "e5c7cdde872bf27c43e934008c389c0f683788499a7c05f6")
        #expect(try Self.run(try DES.context(.des, .cbc, key: k, iv: iv, encrypt: false, padding: false), cbc) == p)
        // 3DES-CBC with padding round-trips any length.
        for n in [0, 1, 7, 8, 9, 23] {
            let data = [UInt8](repeating: 0x5a, count: n)
            let ct = try Self.run(try DES.context(.tripleDES, .cbc, key: k3, iv: iv, encrypt: true, padding: true), data)
            #expect(ct.count == (n / 8 + 1) * 8)
            #expect(try Self.run(try DES.context(.tripleDES, .cbc, key: k3, iv: iv, encrypt: false, padding: true), ct) == data)
        }
        #expect(throws: CryptoError.self) { try DES.context(.tripleDES, .ecb, key: k, iv: nil, encrypt: true, padding: false) }
    }

    @Test func desParity() {
        var key = [UInt8](0...23)
        #expect(!DES.hasOddParity(key))
        DES.setOddParity(&key)
        #expect(DES.hasOddParity(key))
        #expect(key[0] == 0x01 && key[1] == 0x01 && key[2] == 0x02 && key[3] == 0x02 && key[7] == 0x07)
        #expect(DES.hasOddParity(Hex.decode("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")))
    }

    /// RFC 8439 §2.8.2, both directions; a changed tag, AAD or nonce fails.
    @Test func chacha20Poly1305() throws {
        let key = [UInt8](0x80...0x9f)
        let nonce = Hex.decode("070000004041424344454647")
        let aad = Hex.decode("50515253c0c1c2c3c4c5c6c7")
        let pt = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let ct = """
            d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b\
            1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
            3ff4def08e4b7a9de576d26586cec64b6116
            """
        let (c, tag) = try ChaCha20Poly1305.encrypt(key: key, nonce: nonce, plaintext: pt, aad: aad)
        #expect(Hex.encode(c) == ct)
        #expect(Hex.encode(tag) == "1ae10b594f09e26a7e902ecbd0600691")
        #expect(try ChaCha20Poly1305.decrypt(key: key, nonce: nonce, ciphertext: c, tag: tag, aad: aad) == pt)
        var bad = tag
        bad[15] ^= 1
        #expect(throws: CryptoError.self) { try ChaCha20Poly1305.decrypt(key: key, nonce: nonce, ciphertext: c, tag: bad, aad: aad) }
        #expect(throws: CryptoError.self) { try ChaCha20Poly1305.decrypt(key: key, nonce: nonce, ciphertext: c, tag: tag, aad: []) }
        #expect(throws: CryptoError.self) { try ChaCha20Poly1305.encrypt(key: key, nonce: [1, 2, 3], plaintext: pt, aad: []) }
        // Streaming equals one-shot.
        let s = try AEADContext(.chacha20Poly1305, key: key, iv: nonce, aad: aad, encrypt: true)
        let streamed = try s.update(Array(pt[..<50])) + s.update(Array(pt[50...]))
        #expect(streamed == c)
        #expect(try s.finishEncrypt(tagLength: 16) == tag)
    }

    /// NIST GCM test cases 2 and 4 (McGrew and Viega) through the generic AEAD context.
    @Test func gcmThroughAEADContext() throws {
        let z = try AEADContext(.aesGCM, key: [UInt8](repeating: 0, count: 16), iv: [UInt8](repeating: 0, count: 12), aad: [],
                                encrypt: true)
        #expect(Hex.encode(try z.update([UInt8](repeating: 0, count: 16))) == "0388dace60b6a392f328c2b971b2fe78")
        #expect(Hex.encode(try z.finishEncrypt(tagLength: 16)) == "ab6e47d42cec13bdf53a67b21257bddf")
        let key = Hex.decode("feffe9928665731c6d6a8f9467308308"), iv = Hex.decode("cafebabefacedbaddecaf888")
        let aad = Hex.decode("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let pt = Hex.decode("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        let c = try AEADContext(.aesGCM, key: key, iv: iv, aad: aad, encrypt: true)
        #expect(Hex.encode(try c.update(pt)) == "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091")
        #expect(Hex.encode(try c.finishEncrypt(tagLength: 16)) == "5bc94fbc3221a5db94fae95ae7121a47")
    }

    /// RFC 3394 / RFC 5649 with the initial value given explicitly: the
    /// standard one reproduces RFC 3394 §4.1 and RFC 5649 §6; another one
    /// (an "alternative initial value", RFC 3394 §2.2.3.2) round-trips and
    /// is checked on unwrap.
    @Test func keyWrapWithIV() throws {
        let kek = Hex.decode("000102030405060708090A0B0C0D0E0F")
        let key = Hex.decode("00112233445566778899AABBCCDDEEFF")
        let std = [UInt8](repeating: 0xA6, count: 8)
        #expect(Hex.encode(try AESKeyWrap.wrap(kek: kek, key: key, padded: false, iv: std))
                == "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5")
        let alt = Hex.decode("0123456789abcdef")
        let w = try AESKeyWrap.wrap(kek: kek, key: key, padded: false, iv: alt)
        #expect(Hex.encode(w) != "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5")
        #expect(try AESKeyWrap.unwrap(kek: kek, wrapped: w, padded: false, iv: alt) == key)
        #expect(throws: CryptoError.self) { try AESKeyWrap.unwrap(kek: kek, wrapped: w, padded: false) }
        #expect(throws: CryptoError.self) { try AESKeyWrap.wrap(kek: kek, key: key, padded: false, iv: [1, 2, 3]) }

        let kek5649 = Hex.decode("5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8")
        let k20 = Hex.decode("c37b7e6492584340bed12207808941155068f738")
        #expect(Hex.encode(try AESKeyWrap.wrap(kek: kek5649, key: k20, padded: true, iv: [0xA6, 0x59, 0x59, 0xA6]))
                == "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a")
        let altPad: [UInt8] = [1, 2, 3, 4]
        let wp = try AESKeyWrap.wrap(kek: kek5649, key: k20, padded: true, iv: altPad)
        #expect(try AESKeyWrap.unwrap(kek: kek5649, wrapped: wp, padded: true, iv: altPad) == k20)
        #expect(throws: CryptoError.self) { try AESKeyWrap.unwrap(kek: kek5649, wrapped: wp, padded: true) }
    }
}
