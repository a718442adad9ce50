import Testing
import KeyshareCrypto

@Suite struct KnownAnswerTests {
    @Test(arguments: [
        (DigestAlgorithm.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (.sha224, "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"),
        (.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (.sha384, "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"),
        (.sha512, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
    ])
    func shaOfABC(_ alg: DigestAlgorithm, _ expected: String) throws {
        #expect(Hex.encode(alg.hash(Array("abc".utf8))) == expected)
        let ctx = try DigestContext(alg)
        try ctx.update(Array("a".utf8))
        try ctx.update(Array("bc".utf8))
        #expect(Hex.encode(try ctx.finish()) == expected)
    }

    /// GCM spec test case 3 (AES-128, 96-bit IV, no AAD).
    @Test func aesGCMVector() throws {
        let key = Hex.decode("feffe9928665731c6d6a8f9467308308")
        let iv = Hex.decode("cafebabefacedbaddecaf888")
        let pt = Hex.decode("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255")
        let ct = "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985"
        let (c, tag) = try AESGCM.encrypt(key: key, iv: iv, plaintext: pt, aad: [])
        #expect(Hex.encode(c) == ct)
        #expect(Hex.encode(tag) == "4d5c2af327cd64a62cf35abd2ba6fab4")
        #expect(try AESGCM.decrypt(key: key, iv: iv, ciphertext: c, tag: tag, aad: []) == pt)
        var bad = tag
        bad[0] ^= 1
        #expect(throws: CryptoError.self) { try AESGCM.decrypt(key: key, iv: iv, ciphertext: c, tag: bad, aad: []) }
    }

    /// RFC 4231 test case 2 ("Jefe").
    @Test func hmacRFC4231() throws {
        let key = Array("Jefe".utf8)
        let data = Array("what do ya want for nothing?".utf8)
        #expect(Hex.encode(try HMAC.mac(.sha256, key: key, data: data))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(Hex.encode(try HMAC.mac(.sha512, key: key, data: data))
                == "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737")
        let ctx = try HMACContext(.sha256, key: key)
        try ctx.update(Array(data[0..<10]))
        try ctx.update(Array(data[10...]))
        #expect(Hex.encode(try ctx.finish()) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // RFC 4231 test case 1 with SHA-384.
        #expect(Hex.encode(try HMAC.mac(.sha384, key: [UInt8](repeating: 0x0b, count: 20), data: Array("Hi There".utf8)))
                == "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6")
    }

    /// RFC 3394 §4.1 and §4.6, RFC 5649 §6.
    @Test func aesKeyWrapVectors() throws {
        let kek = Hex.decode("000102030405060708090A0B0C0D0E0F")
        let key = Hex.decode("00112233445566778899AABBCCDDEEFF")
        let wrapped = try AESKeyWrap.wrap(kek: kek, key: key, padded: false)
        #expect(Hex.encode(wrapped) == "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5")
        #expect(try AESKeyWrap.unwrap(kek: kek, wrapped: wrapped, padded: false) == key)

        let kek256 = Hex.decode("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F")
        let key256 = Hex.decode("00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F")
        #expect(Hex.encode(try AESKeyWrap.wrap(kek: kek256, key: key256, padded: false))
                == "28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21")

        let kek5649 = Hex.decode("5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8")
        let key5649 = Hex.decode("c37b7e6492584340bed12207808941155068f738")
        let w = try AESKeyWrap.wrap(kek: kek5649, key: key5649, padded: true)
        #expect(Hex.encode(w) == "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a")
        #expect(try AESKeyWrap.unwrap(kek: kek5649, wrapped: w, padded: true) == key5649)

        var bad = wrapped
        bad[3] ^= 0x40
        #expect { try AESKeyWrap.unwrap(kek: kek, wrapped: bad, padded: false) } throws: {
            ($0 as? CryptoError)?.kind == .authenticationFailed
        }
    }

    /// RFC 7914 §12, the N=1024 vector.
    @Test func scryptRFC7914() throws {
        let params = PINKDFParameters(log2N: 10, r: 8, p: 16, salt: Array("NaCl".utf8))
        let out = try PINKDF.deriveKey(pin: Array("password".utf8), parameters: params, length: 64)
        #expect(Hex.encode(out) == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640")
    }

    /// NIST SP 800-38A F.2.5 (CBC-AES256.Encrypt), first two blocks, plus padded round trips.
    @Test func aesCBC() throws {
        let key = Hex.decode("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
        let iv = Hex.decode("000102030405060708090a0b0c0d0e0f")
        let pt = Hex.decode("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
        let ct = try AESCBC.encrypt(key: key, iv: iv, data: pt, padding: false)
        #expect(Hex.encode(ct) == "f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d")
        #expect(try AESCBC.decrypt(key: key, iv: iv, data: ct, padding: false) == pt)
        #expect(throws: CryptoError.self) { try AESCBC.encrypt(key: key, iv: iv, data: [1, 2, 3], padding: false) }

        for n in [0, 1, 15, 16, 17, 100] {
            let data = [UInt8](repeating: 0xA5, count: n)
            let c = try AESCBC.encrypt(key: key, iv: iv, data: data, padding: true)
            #expect(c.count == (n / 16 + 1) * 16)
            #expect(try AESCBC.decrypt(key: key, iv: iv, data: c, padding: true) == data)
            // Multi-part in odd chunks gives the same bytes.
            let ctx = try AESCBCContext(encrypt: true, key: key, iv: iv, padding: true)
            var multi: [UInt8] = []
            var i = 0
            while i < n { let j = min(n, i + 7); multi += try ctx.update(Array(data[i..<j])); i = j }
            multi += try ctx.finish()
            #expect(multi == c)
        }
    }
}
