#if canImport(Glibc)
import Glibc
#endif
import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// Published vectors (Tests/Fixtures/vectors) through the PKCS #11 runtime:
/// C_Digest* for SHA-3 and SHA-512/t, C_Sign/C_Verify for HMAC and the
/// general-length HMACs, C_DeriveKey for HKDF and SP 800-108, C_GenerateKey
/// for PBKDF2. Each test counts what it ran, so a fixture that fails to load
/// cannot pass silently.
struct DigestKDFVectorTests {
    func bytes(_ r: OutputResult) -> [UInt8] {
        if case .bytes(let b) = r { return b }
        Issue.record("expected bytes, got \(r)")
        return []
    }

    /// A session secret key with a known value, readable back.
    func secret(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ value: [UInt8], type: CK_KEY_TYPE = CKK_GENERIC_SECRET,
                derive: Bool = false) throws -> CK_OBJECT_HANDLE {
        try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, type), Attribute(CKA_VALUE, value),
            .bool(CKA_SIGN, true), .bool(CKA_VERIFY, true), .bool(CKA_DERIVE, derive),
        ])
    }

    func value(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE) throws -> [UInt8] {
        guard case .value(let v)? = try f.rt.getAttributeValue(session: s, object: h, types: [CKA_VALUE]).first else {
            Issue.record("value not readable")
            return []
        }
        return v
    }

    /// A template for a derived key whose value the test may read.
    func readable(_ length: Int, type: CK_KEY_TYPE = CKK_GENERIC_SECRET) -> Template {
        [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, type), .ulong(CKA_VALUE_LEN, CK_ULONG(length)),
         .bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)]
    }

    static let digestFiles: [(String, DigestAlgorithm, CK_MECHANISM_TYPE)] = [
        ("SHA3_224ShortMsg.rsp", .sha3_224, CKM_SHA3_224), ("SHA3_256ShortMsg.rsp", .sha3_256, CKM_SHA3_256),
        ("SHA3_384ShortMsg.rsp", .sha3_384, CKM_SHA3_384), ("SHA3_512ShortMsg.rsp", .sha3_512, CKM_SHA3_512),
        ("SHA512_224ShortMsg.rsp", .sha512_224, CKM_SHA512_224), ("SHA512_256ShortMsg.rsp", .sha512_256, CKM_SHA512_256),
    ]

    /// NIST CAVP ShortMsg: every byte-oriented message, single-part and in
    /// two C_DigestUpdate parts, through the decoded mechanism.
    @Test(arguments: digestFiles)
    func cavpShortMessages(file: String, algorithm: DigestAlgorithm, type: CK_MECHANISM_TYPE) throws {
        let (f, s) = try loggedIn()
        let m = try Mechanism(type: type, parameter: nil)
        #expect(m == .digest(algorithm))
        var count = 0
        for r in VectorFiles.records(file) {
            guard let len = r["Len"].flatMap({ Int($0) }), let msgHex = r["Msg"], let md = r["MD"] else { continue }
            let msg = Array(hexBytes(msgHex).prefix(len / 8))
            try f.rt.digestInit(session: s, mechanism: m)
            #expect(hexString(bytes(try f.rt.digest(session: s, data: msg, capacity: 64))) == md, "\(file) Len=\(len)")
            try f.rt.digestInit(session: s, mechanism: m)
            try f.rt.digestUpdate(session: s, part: Array(msg.prefix(msg.count / 3)))
            try f.rt.digestUpdate(session: s, part: Array(msg.dropFirst(msg.count / 3)))
            #expect(hexString(bytes(try f.rt.digestFinal(session: s, capacity: 64))) == md)
            count += 1
        }
        #expect(count >= 73, "\(file): \(count) vectors")
        print("\(file): \(count) vectors")
    }

    static let hmacByHash: [String: (DigestAlgorithm, CK_MECHANISM_TYPE, CK_MECHANISM_TYPE)] = [
        "SHA-1": (.sha1, CKM_SHA_1_HMAC, CKM_SHA_1_HMAC_GENERAL),
        "SHA-224": (.sha224, CKM_SHA224_HMAC, CKM_SHA224_HMAC_GENERAL),
        "SHA-256": (.sha256, CKM_SHA256_HMAC, CKM_SHA256_HMAC_GENERAL),
        "SHA-384": (.sha384, CKM_SHA384_HMAC, CKM_SHA384_HMAC_GENERAL),
        "SHA-512": (.sha512, CKM_SHA512_HMAC, CKM_SHA512_HMAC_GENERAL),
        "SHA3-224": (.sha3_224, CKM_SHA3_224_HMAC, CKM_SHA3_224_HMAC_GENERAL),
        "SHA3-256": (.sha3_256, CKM_SHA3_256_HMAC, CKM_SHA3_256_HMAC_GENERAL),
        "SHA3-384": (.sha3_384, CKM_SHA3_384_HMAC, CKM_SHA3_384_HMAC_GENERAL),
        "SHA3-512": (.sha3_512, CKM_SHA3_512_HMAC, CKM_SHA3_512_HMAC_GENERAL),
    ]

    /// Signs with the full or the general-length mechanism (as the length
    /// asks), checks the MAC, then verifies it and a corrupted copy.
    func checkMAC(_ f: Fixture, _ s: CK_SESSION_HANDLE, hash: String, key: [UInt8], msg: [UInt8], mac: [UInt8],
                  _ what: String) throws {
        guard let (d, full, general) = Self.hmacByHash[hash] else { Issue.record("hash \(hash)"); return }
        let k = try secret(f, s, key)
        let m: Mechanism
        if mac.count == d.outputSize {
            m = try Mechanism(type: full, parameter: nil)
        } else {
            var n = CK_ULONG(mac.count)
            m = try withUnsafeBytes(of: &n) { try Mechanism(type: general, parameter: $0) }
        }
        try f.rt.signInit(session: s, mechanism: m, key: k)
        #expect(try f.rt.sign(session: s, data: msg, capacity: nil) == .length(mac.count))
        #expect(bytes(try f.rt.sign(session: s, data: msg, capacity: 64)) == mac, "\(what)")
        try f.rt.verifyInit(session: s, mechanism: m, key: k)
        try f.rt.verifyUpdate(session: s, part: msg)
        try f.rt.verifyFinal(session: s, signature: mac)
        var bad = mac
        bad[bad.count - 1] ^= 0x80
        try f.rt.verifyInit(session: s, mechanism: m, key: k)
        #expect(rv { try f.rt.verify(session: s, data: msg, signature: bad) } == CKR_SIGNATURE_INVALID)
        try f.rt.destroyObject(session: s, object: k)
    }

    /// RFC 4231 (SHA-224..512, test cases 1-4, 6, 7), the CAVP HMAC subset
    /// (SHA-1..512 with truncated tags through *_HMAC_GENERAL), the NIST
    /// HMAC-SHA3 samples and RFC 4231 test case 5 (truncated to 128 bits).
    @Test func hmacVectors() throws {
        let (f, s) = try loggedIn()
        var count = 0
        for (file, hash) in [("rfc-4231-sha224.txt", "SHA-224"), ("rfc-4231-sha256.txt", "SHA-256"),
                             ("rfc-4231-sha384.txt", "SHA-384"), ("rfc-4231-sha512.txt", "SHA-512")] {
            for r in VectorFiles.records(file) {
                guard let key = r["Key"], let msg = r["Msg"], let md = r["MD"] else { continue }
                try checkMAC(f, s, hash: hash, key: hexBytes(key), msg: hexBytes(msg), mac: hexBytes(md), "\(file)")
                count += 1
            }
        }
        let cavpHash = ["20": "SHA-1", "28": "SHA-224", "32": "SHA-256", "48": "SHA-384", "64": "SHA-512"]
        for r in VectorFiles.records("HMAC_subset.rsp") {
            guard let l = r["L"], let hash = cavpHash[l], let key = r["Key"], let msg = r["Msg"],
                  let mac = r["Mac"] else { continue }
            try checkMAC(f, s, hash: hash, key: hexBytes(key), msg: hexBytes(msg), mac: hexBytes(mac),
                         "CAVP L=\(l) Count=\(r["Count"] ?? "?")")
            count += 1
        }
        for r in VectorFiles.records("misc-vectors.txt") where r["Kind"] == "HMAC" {
            guard let hash = r["Hash"], let msg = r["Msg"], let mac = r["Mac"] else { continue }
            let key = r["Key"].map(hexBytes) ?? (0..<(Int(r["KeyLen"] ?? "0") ?? 0)).map { UInt8($0 & 0xFF) }
            try checkMAC(f, s, hash: hash, key: key, msg: Array(msg.utf8), mac: hexBytes(mac), "\(hash) \(msg)")
            count += 1
        }
        #expect(count == 6 * 4 + 105 + 16, "\(count) HMAC vectors")
        print("HMAC: \(count) vectors")
    }

    /// RFC 5869 appendix A, all seven cases: extract-and-expand, extract
    /// alone (PRK), expand alone from the PRK, and CKM_HKDF_DATA.
    @Test func hkdfRFC5869() throws {
        let (f, s) = try loggedIn()
        var count = 0
        for file in ["rfc-5869-HKDF-SHA256.txt", "rfc-5869-HKDF-SHA1.txt"] {
            for r in VectorFiles.records(file, startKey: "COUNT") {
                guard let hash = r["Hash"], let ikm = r["IKM"], let okm = r["OKM"], let prk = r["PRK"],
                      let l = r["L"].flatMap({ Int($0) }) else { continue }
                let d: DigestAlgorithm = hash == "SHA-1" ? .sha1 : .sha256
                let saltBytes = hexBytes(r["salt"] ?? "")
                let salt: HKDFParameters.Salt = saltBytes.isEmpty ? .null : .data(saltBytes)
                let info = hexBytes(r["info"] ?? "")
                let base = try secret(f, s, hexBytes(ikm), derive: true)
                let both = HKDFParameters(extract: true, expand: true, prf: d, salt: salt, info: info)
                let k1 = try f.rt.deriveKey(session: s, mechanism: .hkdf(both, data: false), baseKey: base,
                                            template: readable(l))
                #expect(hexString(try value(f, s, k1)) == okm, "\(file) \(r["COUNT"] ?? "")")
                let extract = HKDFParameters(extract: true, expand: false, prf: d, salt: salt, info: [])
                let k2 = try f.rt.deriveKey(session: s, mechanism: .hkdf(extract, data: false), baseKey: base,
                                            template: readable(d.outputSize))
                #expect(hexString(try value(f, s, k2)) == prk)
                let prkKey = try secret(f, s, hexBytes(prk), derive: true)
                let expand = HKDFParameters(extract: false, expand: true, prf: d, salt: .null, info: info)
                let k3 = try f.rt.deriveKey(session: s, mechanism: .hkdf(expand, data: false), baseKey: prkKey,
                                            template: readable(l))
                #expect(hexString(try value(f, s, k3)) == okm)
                let k4 = try f.rt.deriveKey(session: s, mechanism: .hkdf(both, data: true), baseKey: base,
                                            template: [.ulong(CKA_VALUE_LEN, CK_ULONG(l))])
                #expect(hexString(try value(f, s, k4)) == okm)
                count += 1
            }
        }
        #expect(count == 7)
        print("HKDF: \(count) RFC 5869 cases")
    }

    static let kbkdfPRF: [String: (CK_MECHANISM_TYPE, MACAlgorithm, CK_KEY_TYPE)] = [
        "CMAC_AES128": (CKM_AES_CMAC, .cmacAES, CKK_AES), "CMAC_AES192": (CKM_AES_CMAC, .cmacAES, CKK_AES),
        "CMAC_AES256": (CKM_AES_CMAC, .cmacAES, CKK_AES),
        "HMAC_SHA1": (CKM_SHA_1_HMAC, .hmac(.sha1), CKK_GENERIC_SECRET),
        "HMAC_SHA224": (CKM_SHA224_HMAC, .hmac(.sha224), CKK_GENERIC_SECRET),
        "HMAC_SHA256": (CKM_SHA256_HMAC, .hmac(.sha256), CKK_GENERIC_SECRET),
        "HMAC_SHA384": (CKM_SHA384_HMAC, .hmac(.sha384), CKK_GENERIC_SECRET),
        "HMAC_SHA512": (CKM_SHA512_HMAC, .hmac(.sha512), CKK_GENERIC_SECRET),
    ]

    /// NIST CAVP KBKDF counter mode (192 vectors: 8 PRFs, counter before,
    /// in the middle of and after the fixed data, r = 8..32 bits) and
    /// feedback mode (the two CAVP vectors kept by hand).
    @Test func sp800108CAVP() throws {
        let (f, s) = try loggedIn()
        var counter = 0, feedback = 0
        for r in VectorFiles.records("KBKDF_CTR_subset.txt") {
            guard let prfName = r["PRF"], let (prfType, prf, keyType) = Self.kbkdfPRF[prfName],
                  let loc = r["CTRLOCATION"], let rlen = r["RLEN"].flatMap({ Int($0.split(separator: "_")[0]) }),
                  let l = r["L"].flatMap({ Int($0) }), let ki = r["KI"], let ko = r["KO"] else { continue }
            let iter = SP800108Parameters.DataParam.iterationCounter(bits: rlen, littleEndian: false)
            let data: [SP800108Parameters.DataParam]
            switch loc {
            case "BEFORE_FIXED": data = [iter, .bytes(hexBytes(r["FixedInputData"] ?? ""))]
            case "AFTER_FIXED": data = [.bytes(hexBytes(r["FixedInputData"] ?? "")), iter]
            default: data = [.bytes(hexBytes(r["DataBeforeCtrData"] ?? "")), iter,
                             .bytes(hexBytes(r["DataAfterCtrData"] ?? ""))]
            }
            let base = try secret(f, s, hexBytes(ki), type: keyType, derive: true)
            let p = SP800108Parameters(prf: prf, prfMechanism: prfType, feedbackIV: nil, data: data, additionalKeys: [])
            let k = try f.rt.deriveKey(session: s, mechanism: .sp800108(p), baseKey: base, template: readable(l / 8))
            #expect(hexString(try value(f, s, k)) == ko, "\(prfName) \(loc) r=\(rlen) COUNT=\(r["COUNT"] ?? "")")
            counter += 1
        }
        for r in VectorFiles.records("misc-vectors.txt") where r["Kind"] == "KBKDF-FEEDBACK" {
            guard let prfName = r["PRF"], let (prfType, prf, keyType) = Self.kbkdfPRF[prfName],
                  let rlen = r["RLEN"].flatMap({ Int($0) }), let ki = r["KI"], let ko = r["KO"] else { continue }
            let base = try secret(f, s, hexBytes(ki), type: keyType, derive: true)
            let data: [SP800108Parameters.DataParam] = [.iterationFeedback, .counter(bits: rlen, littleEndian: false),
                                                        .bytes(hexBytes(r["FixedInputData"] ?? ""))]
            let p = SP800108Parameters(prf: prf, prfMechanism: prfType, feedbackIV: hexBytes(r["IV"] ?? ""),
                                       data: data, additionalKeys: [])
            let k = try f.rt.deriveKey(session: s, mechanism: .sp800108(p), baseKey: base,
                                       template: readable(hexBytes(ko).count))
            #expect(hexString(try value(f, s, k)) == ko, "feedback \(prfName)")
            feedback += 1
        }
        #expect(counter == 192 && feedback == 2, "\(counter) counter, \(feedback) feedback")
        print("SP 800-108: \(counter) counter-mode and \(feedback) feedback-mode CAVP vectors")
    }

    /// RFC 6070 (PBKDF2-HMAC-SHA1) and RFC 7914 §11 (PBKDF2-HMAC-SHA256)
    /// through C_GenerateKey(CKM_PKCS5_PBKD2). RFC 6070's 16,777,216-iteration
    /// case takes seconds and runs only with KEYSHARE_SLOW_VECTORS=1.
    @Test func pbkdf2Vectors() throws {
        let (f, s) = try loggedIn()
        let slow = getenv("KEYSHARE_SLOW_VECTORS").map { String(cString: $0) == "1" } ?? false
        var count = 0, skipped = 0
        func unescape(_ t: String) -> [UInt8] {
            var out: [UInt8] = []
            var it = Array(t.utf8)[...]
            while let c = it.popFirst() {
                if c == UInt8(ascii: "\\"), it.first == UInt8(ascii: "0") { it.removeFirst(); out.append(0) } else { out.append(c) }
            }
            return out
        }
        var cases: [(DigestAlgorithm, [UInt8], [UInt8], Int, String)] = []
        for r in VectorFiles.records("rfc-6070-PBKDF2-SHA1.txt") {
            guard let p = r["PASSWORD"], let salt = r["SALT"], let it = r["ITERATIONS"].flatMap({ Int($0) }),
                  let dk = r["DERIVED_KEY"] else { continue }
            cases.append((.sha1, unescape(p), unescape(salt), it, dk))
        }
        for r in VectorFiles.records("misc-vectors.txt") where r["Kind"] == "PBKDF2" {
            guard let p = r["Password"], let salt = r["Salt"], let it = r["Iterations"].flatMap({ Int($0) }),
                  let dk = r["DK"] else { continue }
            cases.append((.sha256, Array(p.utf8), Array(salt.utf8), it, dk))
        }
        for (d, password, salt, iterations, dk) in cases {
            if iterations > 1_000_000, !slow {
                skipped += 1
                continue
            }
            let p = PBKDF2Parameters(prf: d, salt: salt, iterations: iterations, password: password)
            let k = try f.rt.generateKey(session: s, mechanism: .pbkdf2(p), template: readable(hexBytes(dk).count))
            #expect(hexString(try value(f, s, k)) == dk, "PBKDF2 \(d) c=\(iterations)")
            count += 1
        }
        #expect(count + skipped == 8 && count >= 7)
        print("PBKDF2: \(count) vectors (\(skipped) slow one skipped)")
    }
}
