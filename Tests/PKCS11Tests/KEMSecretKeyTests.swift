import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// The secret key objects C_EncapsulateKey / C_DecapsulateKey (ML-KEM) and C_GenerateKey make,
/// attribute by attribute: the whole stored set (`Runtime.resolve`), not just the flags a test
/// happens to read. `Runtime.secretKeyAttributes` and `store` build these sets on their hot path
/// (docs/benchmarks.md, "Module work per KEM call"); any change of a default, of the caller's
/// part or of the computed attributes shows here.
struct KEMSecretKeyTests {
    func mlKEMPair(_ f: Fixture, _ s: CK_SESSION_HANDLE) throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        let t: Template = [.bool(CKA_TOKEN, false), .ulong(CKA_PARAMETER_SET, CKP_ML_KEM_768)]
        return try f.rt.generateKeyPair(session: s, mechanism: try Mechanism(type: CKM_ML_KEM_KEY_PAIR_GEN, parameter: nil),
                                        publicTemplate: t, privateTemplate: [.bool(CKA_TOKEN, false)])
    }

    /// Every stored attribute of `h` as `Runtime.resolve` shows it.
    func stored(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ h: CK_OBJECT_HANDLE) throws -> AttributeMap {
        try f.rt.resolve(try f.rt.session(s), h).attributes
    }

    /// The expected set of a secret key made by the module: the usage defaults (KeyUsagePolicy),
    /// the computed attributes, CKA_CHECK_VALUE (SHA-1 of the value, first 3 bytes) and the
    /// attributes `resolve` adds (UNIQUE_ID is compared for presence only).
    func expected(value: [UInt8], keyType: CK_KEY_TYPE = CKK_GENERIC_SECRET, mechanism: CK_MECHANISM_TYPE,
                  sensitive: Bool = true, extractable: Bool = false, bornSecret: Bool = false, local: Bool = false,
                  checkValue: [UInt8], extra: AttributeMap = [:]) -> AttributeMap {
        var a: AttributeMap = [
            CKA_CLASS: AttributeCoding.ulong(CKO_SECRET_KEY), CKA_KEY_TYPE: AttributeCoding.ulong(keyType),
            CKA_VALUE: value, CKA_VALUE_LEN: AttributeCoding.ulong(CK_ULONG(value.count)),
            CKA_TOKEN: AttributeCoding.bool(false), CKA_PRIVATE: AttributeCoding.bool(true),
            CKA_SENSITIVE: AttributeCoding.bool(sensitive), CKA_EXTRACTABLE: AttributeCoding.bool(extractable),
            CKA_ALWAYS_SENSITIVE: AttributeCoding.bool(bornSecret && sensitive),
            CKA_NEVER_EXTRACTABLE: AttributeCoding.bool(bornSecret && !extractable),
            CKA_LOCAL: AttributeCoding.bool(local), CKA_KEY_GEN_MECHANISM: AttributeCoding.ulong(mechanism),
            CKA_ENCRYPT: AttributeCoding.bool(true), CKA_DECRYPT: AttributeCoding.bool(true),
            CKA_SIGN: AttributeCoding.bool(true), CKA_VERIFY: AttributeCoding.bool(true),
            CKA_WRAP: AttributeCoding.bool(true), CKA_UNWRAP: AttributeCoding.bool(true),
            CKA_DERIVE: AttributeCoding.bool(false), CKA_CHECK_VALUE: checkValue,
        ]
        a.merge(extra) { _, new in new }
        return a
    }

    func checkValue(_ value: [UInt8]) -> [UInt8] { Array(DigestAlgorithm.sha1.hash(value).prefix(3)) }

    /// `got` equals `want` in every attribute; CKA_UNIQUE_ID only present and non-empty.
    func expectSame(_ got: AttributeMap, _ want: AttributeMap, _ what: String) {
        var rest = got
        #expect(rest.removeValue(forKey: CKA_UNIQUE_ID)?.isEmpty == false, "\(what): CKA_UNIQUE_ID")
        #expect(Set(rest.keys) == Set(want.keys), "\(what): attribute types \(Set(rest.keys).symmetricDifference(want.keys).sorted())")
        for (t, v) in want where rest[t] != v {
            Issue.record("\(what): attribute 0x\(String(t, radix: 16)) is \(rest[t] ?? []) not \(v)")
        }
    }

    /// An empty template: every default (3.2 §5.18: ALWAYS_SENSITIVE, NEVER_EXTRACTABLE and LOCAL
    /// false), from both sides, with both entry shapes (arrays, and the C layer's buffers).
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func kemSecretKeysHaveTheDefaultSet() throws {
        let (f, s) = try loggedIn()
        let (pub, priv) = try mlKEMPair(f, s)
        let kem = try Mechanism(type: CKM_ML_KEM, parameter: nil)
        let (r, k1) = try f.rt.encapsulateKey(session: s, mechanism: kem, publicKey: pub, template: [], capacity: 2000)
        guard case .bytes(let ct) = r, let k1 else { Issue.record("no ciphertext"); return }
        #expect(ct.count == 1088)
        let k2 = try f.rt.decapsulateKey(session: s, mechanism: kem, privateKey: priv, template: [], ciphertext: ct)
        var ct2 = [UInt8](repeating: 0, count: 1200)
        let (r2, k3) = try ct2.withUnsafeMutableBytes {
            try f.rt.encapsulateKey(session: s, mechanism: kem, publicKey: pub, template: [], output: $0.baseAddress, capacity: $0.count)
        }
        #expect(r2 == .written(1088))
        let k4 = try ct2.withUnsafeBytes {
            try f.rt.decapsulateKey(session: s, mechanism: kem, privateKey: priv, template: [],
                                    ciphertext: UnsafeRawBufferPointer(rebasing: $0[0..<1088]))
        }
        for (h, other, what) in [(k1, k2, "encapsulated"), (k2, k1, "decapsulated"), (try #require(k3), k4, "encapsulated (buffer)"),
                                 (k4, try #require(k3), "decapsulated (buffer)")] {
            let got = try stored(f, s, h)
            let value = try #require(got[CKA_VALUE])
            #expect(value.count == 32)
            #expect(try stored(f, s, other)[CKA_VALUE] == value, "\(what): both sides hold the same secret")
            expectSame(got, expected(value: value, mechanism: CKM_ML_KEM, checkValue: checkValue(value)), what)
        }
    }

    /// The caller's template laid over the defaults: its flags win, its label and ID are kept, an
    /// AES key of CKA_VALUE_LEN 16 takes the secret's first 16 bytes, CKA_VALUE_LEN itself is computed.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func kemSecretKeysTakeTheCallersTemplate() throws {
        let (f, s) = try loggedIn()
        let (pub, priv) = try mlKEMPair(f, s)
        let kem = try Mechanism(type: CKM_ML_KEM, parameter: nil)
        let t: Template = [.ulong(CKA_KEY_TYPE, CKK_AES), .ulong(CKA_VALUE_LEN, 16), .bool(CKA_ENCRYPT, false),
                           .bool(CKA_DERIVE, true), .bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true),
                           Attribute(CKA_LABEL, Array("kem".utf8)), Attribute(CKA_ID, [7, 7])]
        let (r, k1) = try f.rt.encapsulateKey(session: s, mechanism: kem, publicKey: pub, template: t, capacity: 1088)
        guard case .bytes(let ct) = r, let k1 else { Issue.record("no ciphertext"); return }
        let k2 = try f.rt.decapsulateKey(session: s, mechanism: kem, privateKey: priv, template: t, ciphertext: ct)
        // The whole 32-byte secret, to check the prefix against.
        let whole = try f.rt.decapsulateKey(session: s, mechanism: kem, privateKey: priv,
                                            template: [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)], ciphertext: ct)
        let secret = try #require(try stored(f, s, whole)[CKA_VALUE])
        let extra: AttributeMap = [CKA_ENCRYPT: AttributeCoding.bool(false), CKA_DERIVE: AttributeCoding.bool(true),
                                   CKA_LABEL: Array("kem".utf8), CKA_ID: [7, 7]]
        for (h, what) in [(k1, "encapsulated"), (k2, "decapsulated")] {
            let value = Array(secret.prefix(16))
            let want = expected(value: value, keyType: CKK_AES, mechanism: CKM_ML_KEM, sensitive: false, extractable: true,
                                checkValue: CheckValue.compute(objectClass: CKO_SECRET_KEY, keyType: CKK_AES, value: value) ?? [],
                                extra: extra)
            expectSame(try stored(f, s, h), want, what)
        }
    }

    /// C_GenerateKey shares the builder: LOCAL, ALWAYS_SENSITIVE and NEVER_EXTRACTABLE true, the
    /// generation mechanism, the usage defaults.
    @Test func generatedSecretKeysHaveTheDefaultSet() throws {
        let (f, s) = try loggedIn()
        let k = try f.rt.generateKey(session: s, mechanism: try Mechanism(type: CKM_GENERIC_SECRET_KEY_GEN, parameter: nil),
                                     template: [.ulong(CKA_VALUE_LEN, 20)])
        let got = try stored(f, s, k)
        let value = try #require(got[CKA_VALUE])
        #expect(value.count == 20)
        expectSame(got, expected(value: value, mechanism: CKM_GENERIC_SECRET_KEY_GEN, bornSecret: true, local: true,
                                 checkValue: checkValue(value)), "generated")
    }
    /// Each new session key's CKA_UNIQUE_ID is "session-<its handle>-<entry count>" (written digit
    /// by digit now, ObjectTable.newSessionUniqueID), different for every key.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func sessionKeysHaveDistinctUniqueIDs() throws {
        let (f, s) = try loggedIn()
        let (pub, _) = try mlKEMPair(f, s)
        let kem = try Mechanism(type: CKM_ML_KEM, parameter: nil)
        var seen: Set<[UInt8]> = []
        for _ in 0..<12 {
            let (_, k) = try f.rt.encapsulateKey(session: s, mechanism: kem, publicKey: pub, template: [], capacity: 1088)
            let h = try #require(k)
            let id = try #require(try stored(f, s, h)[CKA_UNIQUE_ID])
            let text = String(decoding: id, as: UTF8.self)
            let prefix = "session-\(h)-"
            #expect(text.hasPrefix(prefix) && text.count > prefix.count && text.dropFirst(prefix.count).allSatisfy(\.isNumber),
                    "CKA_UNIQUE_ID \(text)")
            #expect(seen.insert(id).inserted, "CKA_UNIQUE_ID \(text) given twice")
        }
    }

    /// A new session object does not move the generation the session's resolved-key memo is
    /// checked against (a KEM call per message keeps its key resolved); a destroy still does.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum)) func newKeysKeepTheMemoizedKey() throws {
        let (f, s) = try loggedIn()
        let (pub, _) = try mlKEMPair(f, s)
        let kem = try Mechanism(type: CKM_ML_KEM, parameter: nil)
        _ = try f.rt.encapsulateKey(session: s, mechanism: kem, publicKey: pub, template: [], capacity: 1088)
        let before = f.rt.lock.withLock { f.rt.objectGeneration }
        let (_, k) = try f.rt.encapsulateKey(session: s, mechanism: kem, publicKey: pub, template: [], capacity: 1088)
        let after = f.rt.lock.withLock { f.rt.objectGeneration }
        #expect(after == before)
        #expect(try f.rt.session(s).keyMemo.view(pub, generation: after, counter: { 0 }) != nil)
        try f.rt.destroyObject(session: s, object: try #require(k))
        #expect(f.rt.lock.withLock { f.rt.objectGeneration } != after)
    }
    /// Keys made from alternating templates each get their own set (the last set is remembered by
    /// template, SecretKeyTemplateMemo), and a template that fails its checks fails every time,
    /// also right after an accepted one.
    @Test func alternatingTemplatesEachGetTheirOwnSet() throws {
        let (f, s) = try loggedIn()
        let gen = try Mechanism(type: CKM_GENERIC_SECRET_KEY_GEN, parameter: nil)
        let a: Template = [.ulong(CKA_VALUE_LEN, 20)]
        let b: Template = [.ulong(CKA_VALUE_LEN, 20), .bool(CKA_ENCRYPT, false), Attribute(CKA_LABEL, Array("b".utf8))]
        let bad: Template = [.ulong(CKA_VALUE_LEN, 20), .bool(CKA_TRUSTED, true)]
        for (i, t) in [a, b, a, a, b, b, a].enumerated() {
            let k = try f.rt.generateKey(session: s, mechanism: gen, template: t)
            let got = try stored(f, s, k)
            let value = try #require(got[CKA_VALUE])
            let extra: AttributeMap = t.count == 1 ? [:] : [CKA_ENCRYPT: AttributeCoding.bool(false), CKA_LABEL: Array("b".utf8)]
            expectSame(got, expected(value: value, mechanism: CKM_GENERIC_SECRET_KEY_GEN, bornSecret: true, local: true,
                                     checkValue: checkValue(value), extra: extra), "key \(i)")
            #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: gen, template: bad) } == CKR_ATTRIBUTE_READ_ONLY)
        }
    }
}
