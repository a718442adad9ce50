import CPKCS11
import Keychain
import KeyshareCrypto
@testable import PKCS11
import Testing

/// DSA and PKCS #3 DH (FFCKeys.swift). DSA against RFC 6979 A.2.1's
/// published 1024-bit key and signatures (FIPS 186 DSA with deterministic k:
/// any correct verifier accepts them); DH by both parties' agreement and Z
/// recomputed by plain modular exponentiation.
struct FFCMechanismTests {
    let h = SymmetricMechanismTests()
    static func hex(_ s: String) -> [UInt8] { SymmetricMechanismTests.hex(s) }
    static let p = hex("""
        86F5CA03DCFEB225063FF830A0C769B9DD9D6153AD91D7CE27F787C43278B447E6533B86B18BED6E8A48B784A14C252C5BE0DBF60B86D6385BD2F12FB763ED88\
        73ABFD3F5BA2E0A8C0A59082EAC056935E529DAF7C610467899C77ADEDFC846C881870B7B19B2B58F9BE0521A17002E3BDD6B86685EE90B3D9A1B02B782B1779
        """)
    static let q = hex("996F967F6C8E388D9E28D01E205FBA957A5698B1")
    static let g = hex("""
        07B0F92546150B62514BB771E2A0C0CE387F03BDA6C56B505209FF25FD3C133D89BBCD97E904E09114D9A7DEFDEADFC9078EA544D2E401AEECC40BB9FBBF78FD\
        87995A10A1C27CB7789B594BA7EFB5C4326A9FE59A070E136DB77175464ADCA417BE5DCE2F40D10A46A3A3943F26AB7FD9C0398FF8C76EE0A56826A8A88F1DBD
        """)
    static let x = hex("411602CB19A6CCC34494D79D98EF1E7ED5AF25F7")
    static let y = hex("""
        5DF5E01DED31D0297E274E1691C192FE5868FEF9E19A84776454B100CF16F65392195A38B90523E2542EE61871C0440CB87C322FC4B4D2EC5E1E7EC766E1BE8D\
        4CE935437DC11C3C8FD426338933EBFE739CB3465F4D3668C5E473508253B1E682F65CBDC4FAE93C2EA212390E54905A86E2223170B44EAA7DA5DD9FFCFB7F3B
        """)
    /// RFC 6979 A.2.1, message "sample": (r, s) with SHA-1 and SHA-224.
    static let sampleSHA1 = hex("2E1A0C2562B2912CAAF89186FB0F42001585DA55" + "29EFB6B0AFF2D7A68EB70CA313022253B9A88DF5")
    static let sampleSHA224 = hex("4BC3B686AEA70145856814A6F1BB53346F02101E" + "410697B92295D994D21EDD2F4ADA85566F6F94C1")
    static let domain: Template = [Attribute(CKA_PRIME, p), Attribute(CKA_SUBPRIME, q), Attribute(CKA_BASE, g)]

    func m(_ t: CK_MECHANISM_TYPE) throws -> Mechanism { try Mechanism(type: t, parameter: nil) }

    func verify(_ f: Fixture, _ s: CK_SESSION_HANDLE, _ mech: Mechanism, _ k: CK_OBJECT_HANDLE, _ data: [UInt8],
                _ sig: [UInt8]) -> CK_RV {
        rv {
            try f.rt.verifyInit(session: s, mechanism: mech, key: k)
            try f.rt.verify(session: s, data: data, signature: sig)
        }
    }

    @Test func catalog() throws {
        let info = { (t: CK_MECHANISM_TYPE) in MechanismCatalog.info(t) }
        #expect(info(CKM_DSA_PARAMETER_GEN) == MechanismInfo(minKeySize: 1024, maxKeySize: 3072, flags: CKF_GENERATE))
        #expect(info(CKM_DSA_KEY_PAIR_GEN) == MechanismInfo(minKeySize: 1024, maxKeySize: 3072, flags: CKF_GENERATE_KEY_PAIR))
        for t in [CKM_DSA, CKM_DSA_SHA1, CKM_DSA_SHA224, CKM_DSA_SHA256, CKM_DSA_SHA384, CKM_DSA_SHA512] {
            #expect(info(t) == MechanismInfo(minKeySize: 1024, maxKeySize: 3072, flags: CKF_SIGN | CKF_VERIFY))
        }
        #expect(info(CKM_DH_PKCS_PARAMETER_GEN) == MechanismInfo(minKeySize: 1024, maxKeySize: 4096, flags: CKF_GENERATE))
        #expect(info(CKM_DH_PKCS_KEY_PAIR_GEN) == MechanismInfo(minKeySize: 1024, maxKeySize: 4096, flags: CKF_GENERATE_KEY_PAIR))
        #expect(info(CKM_DH_PKCS_DERIVE) == MechanismInfo(minKeySize: 1024, maxKeySize: 4096, flags: CKF_DERIVE))
        #expect(rv { _ = try h.mech(CKM_DSA, bytes: [1]) } == CKR_MECHANISM_PARAM_INVALID)
    }

    /// RFC 6979's key through C_CreateObject: its published signatures verify,
    /// the module's own signatures verify, tampering and lengths are refused.
    @Test func dsaPublishedKey() throws {
        let (f, s) = try loggedIn()
        let pub = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, CKK_DSA), Attribute(CKA_VALUE, Self.y),
        ] + Self.domain)
        let priv = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_DSA), Attribute(CKA_VALUE, Self.x),
        ] + Self.domain)
        let sample = Array("sample".utf8)
        #expect(verify(f, s, try m(CKM_DSA_SHA1), pub, sample, Self.sampleSHA1) == CKR_OK)
        #expect(verify(f, s, try m(CKM_DSA_SHA224), pub, sample, Self.sampleSHA224) == CKR_OK)
        #expect(verify(f, s, try m(CKM_DSA), pub, DigestAlgorithm.sha1.hash(sample), Self.sampleSHA1) == CKR_OK)
        #expect(verify(f, s, try m(CKM_DSA_SHA1), pub, Array("test".utf8), Self.sampleSHA1) == CKR_SIGNATURE_INVALID)
        #expect(verify(f, s, try m(CKM_DSA_SHA1), pub, sample, Array(Self.sampleSHA1.dropLast())) == CKR_SIGNATURE_LEN_RANGE)
        // Multi-part hashing verifies the same.
        try f.rt.verifyInit(session: s, mechanism: try m(CKM_DSA_SHA224), key: pub)
        try f.rt.verifyUpdate(session: s, part: Array(sample[..<2]))
        try f.rt.verifyUpdate(session: s, part: Array(sample[2...]))
        try f.rt.verifyFinal(session: s, signature: Self.sampleSHA224)
        // Signing: 40-byte r || s that verify (k is random: not RFC 6979's bytes).
        for t in [CKM_DSA_SHA1, CKM_DSA_SHA256, CKM_DSA_SHA512] {
            try f.rt.signInit(session: s, mechanism: try m(t), key: priv)
            #expect(try f.rt.sign(session: s, data: sample, capacity: nil) == .length(40))
            let sig = h.bytes(try f.rt.sign(session: s, data: sample, capacity: 40))
            #expect(verify(f, s, try m(t), pub, sample, sig) == CKR_OK)
            #expect(verify(f, s, try m(t), priv, sample, sig) == CKR_OK, "a private key verifies with its public value")
        }
        // CKM_DSA takes a digest of a SHA size only.
        try f.rt.signInit(session: s, mechanism: try m(CKM_DSA), key: priv)
        #expect(rv { _ = try f.rt.sign(session: s, data: [UInt8](repeating: 1, count: 21), capacity: 40) } == CKR_DATA_LEN_RANGE)
        // The private value is sensitive; the domain and y are public.
        #expect(try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_VALUE, CKA_PRIME, CKA_SIGN, CKA_PRIVATE])
                == [.sensitive, .value(Self.p), .value([1]), .value([1])])
        #expect(try f.rt.getAttributeValue(session: s, object: pub, types: [CKA_VALUE, CKA_SUBPRIME, CKA_VERIFY])
                == [.value(Self.y), .value(Self.q), .value([1])])
        // Wrong values are refused at creation: y not in the group, x not matching nothing, no subprime.
        var badY = Self.y
        badY[badY.count - 1] ^= 1
        #expect(rv { _ = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, CKK_DSA), Attribute(CKA_VALUE, badY)] + Self.domain) }
                == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PUBLIC_KEY), .ulong(CKA_KEY_TYPE, CKK_DSA), Attribute(CKA_VALUE, Self.y),
            Attribute(CKA_PRIME, Self.p), Attribute(CKA_BASE, Self.g)]) } == CKR_TEMPLATE_INCOMPLETE)
        #expect(rv { _ = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_DSA), Attribute(CKA_VALUE, Self.x),
            .bool(CKA_PRIVATE, false), .bool(CKA_TOKEN, true)] + Self.domain) } == CKR_TEMPLATE_INCONSISTENT)
        // Other families' mechanisms, wrapping.
        #expect(rv { try f.rt.signInit(session: s, mechanism: try m(CKM_ECDSA), key: priv) } == CKR_KEY_TYPE_INCONSISTENT)
        #expect(rv { try f.rt.verifyInit(session: s, mechanism: try m(CKM_SHA256_RSA_PKCS), key: pub) } == CKR_KEY_TYPE_INCONSISTENT)
        let kek = try h.generated(f, s, [CKA_ENCRYPT: false, CKA_DECRYPT: false, CKA_WRAP: true])
        let extractable = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_PRIVATE_KEY), .ulong(CKA_KEY_TYPE, CKK_DSA), Attribute(CKA_VALUE, Self.x),
            .bool(CKA_EXTRACTABLE, true)] + Self.domain)
        #expect(rv { _ = try f.rt.wrapKey(session: s, mechanism: try m(CKM_AES_KEY_WRAP_PAD), wrappingKey: kek,
                                          key: extractable, capacity: 4096) } == CKR_KEY_NOT_WRAPPABLE)
    }

    /// CKM_DSA_KEY_PAIR_GEN on RFC 6979's domain, and CKM_DSA_PARAMETER_GEN.
    @Test func dsaGeneration() throws {
        let (f, s) = try loggedIn()
        let gen = try m(CKM_DSA_KEY_PAIR_GEN)
        let (pub, priv) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: Self.domain,
                                                   privateTemplate: [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)])
        let got = try f.rt.getAttributeValue(session: s, object: priv, types: [CKA_VALUE, CKA_LOCAL, CKA_KEY_GEN_MECHANISM])
        guard case .value(let x) = got[0], case .value(let y) = try f.rt.getAttributeValue(session: s, object: pub,
                                                                                         types: [CKA_VALUE])[0] else {
            Issue.record("values not readable")
            return
        }
        #expect(got[1] == .value([1]) && got[2] == .value(AttributeCoding.ulong(CKM_DSA_KEY_PAIR_GEN)))
        #expect(try FFC.publicValue(FFC.Domain(p: Self.p, q: Self.q, g: Self.g), x: x) == y, "y = g^x mod p")
        try f.rt.signInit(session: s, mechanism: try m(CKM_DSA_SHA384), key: priv)
        let sig = h.bytes(try f.rt.sign(session: s, data: [1, 2, 3], capacity: 40))
        #expect(verify(f, s, try m(CKM_DSA_SHA384), pub, [1, 2, 3], sig) == CKR_OK)
        // Template errors, before any key is made.
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: Array(Self.domain.dropLast()),
                                                  privateTemplate: []) } == CKR_TEMPLATE_INCOMPLETE)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: Self.domain,
                                                  privateTemplate: [.bool(CKA_PRIVATE, false), .bool(CKA_TOKEN, true)]) }
                == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [
            Attribute(CKA_PRIME, Array(Self.p[..<64])), Attribute(CKA_SUBPRIME, Self.q), Attribute(CKA_BASE, Self.g),
        ], privateTemplate: []) } == CKR_KEY_SIZE_RANGE)

        // Domain parameters: 1024 bits (N = 160), then a key pair in them.
        let dp = try f.rt.generateKey(session: s, mechanism: try m(CKM_DSA_PARAMETER_GEN),
                                      template: [.ulong(CKA_PRIME_BITS, 1024)])
        let a = try f.rt.getAttributeValue(session: s, object: dp, types: [CKA_CLASS, CKA_KEY_TYPE, CKA_PRIME_BITS,
                                                                            CKA_SUB_PRIME_BITS, CKA_PRIME, CKA_SUBPRIME, CKA_BASE])
        #expect(Array(a[..<4]) == [.value(AttributeCoding.ulong(CKO_DOMAIN_PARAMETERS)), .value(AttributeCoding.ulong(CKK_DSA)),
                                   .value(AttributeCoding.ulong(1024)), .value(AttributeCoding.ulong(160))])
        guard case .value(let p2) = a[4], case .value(let q2) = a[5], case .value(let g2) = a[6] else { return }
        #expect(p2.count == 128 && q2.count == 20)
        let (pub2, priv2) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: [
            Attribute(CKA_PRIME, p2), Attribute(CKA_SUBPRIME, q2), Attribute(CKA_BASE, g2)], privateTemplate: [])
        try f.rt.signInit(session: s, mechanism: try m(CKM_DSA_SHA256), key: priv2)
        let sig2 = h.bytes(try f.rt.sign(session: s, data: [9], capacity: 40))
        #expect(verify(f, s, try m(CKM_DSA_SHA256), pub2, [9], sig2) == CKR_OK)
        #expect(verify(f, s, try m(CKM_DSA_SHA256), pub, [9], sig2) == CKR_SIGNATURE_INVALID)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try m(CKM_DSA_PARAMETER_GEN), template: []) }
                == CKR_TEMPLATE_INCOMPLETE)
        // Domain parameters by C_CreateObject, found again by class; session objects only.
        let createdDP = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_DOMAIN_PARAMETERS), .ulong(CKA_KEY_TYPE, CKK_DSA)] + Self.domain)
        #expect(try f.rt.getAttributeValue(session: s, object: createdDP, types: [CKA_TOKEN, CKA_PRIME_BITS, CKA_LOCAL])
                == [.value([0]), .value(AttributeCoding.ulong(1024)), .value([0])])
        try f.rt.findObjectsInit(session: s, template: [.ulong(CKA_CLASS, CKO_DOMAIN_PARAMETERS), .ulong(CKA_PRIME_BITS, 1024)])
        #expect(Set(try f.rt.findObjects(session: s, max: 10)) == [createdDP, dp])
        try f.rt.findObjectsFinal(session: s)
        #expect(rv { _ = try f.rt.createObject(session: s, template: [
            .ulong(CKA_CLASS, CKO_DOMAIN_PARAMETERS), .ulong(CKA_KEY_TYPE, CKK_DSA), .bool(CKA_TOKEN, true)] + Self.domain) }
                == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try m(CKM_DSA_PARAMETER_GEN),
                                              template: [.ulong(CKA_PRIME_BITS, 1024), .bool(CKA_TOKEN, true)]) }
                == CKR_TEMPLATE_INCONSISTENT)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try m(CKM_DSA_PARAMETER_GEN),
                                              template: [.ulong(CKA_PRIME_BITS, 1000)]) } == CKR_ATTRIBUTE_VALUE_INVALID)
        #expect(rv { _ = try f.rt.generateKey(session: s, mechanism: try m(CKM_DSA_PARAMETER_GEN),
                                              template: [.ulong(CKA_PRIME_BITS, 1024), .ulong(CKA_SUB_PRIME_BITS, 256)]) }
                == CKR_TEMPLATE_INCONSISTENT, "FIPS 186-4 has no (1024, 256)")
    }

    /// CKM_DH_PKCS_PARAMETER_GEN, two key pairs, CKM_DH_PKCS_DERIVE both ways.
    @Test func diffieHellman() throws {
        let (f, s) = try loggedIn()
        let dp = try f.rt.generateKey(session: s, mechanism: try m(CKM_DH_PKCS_PARAMETER_GEN),
                                      template: [.ulong(CKA_PRIME_BITS, 1024)])
        let a = try f.rt.getAttributeValue(session: s, object: dp, types: [CKA_PRIME, CKA_BASE, CKA_PRIME_BITS, CKA_SUBPRIME])
        guard case .value(let p) = a[0], case .value(let g) = a[1] else { Issue.record("no domain"); return }
        #expect(a[2] == .value(AttributeCoding.ulong(1024)) && a[3] == .typeInvalid, "PKCS #3: no subprime")
        let dom: Template = [Attribute(CKA_PRIME, p), Attribute(CKA_BASE, g)]
        let gen = try m(CKM_DH_PKCS_KEY_PAIR_GEN)
        let readable: Template = [.bool(CKA_SENSITIVE, false), .bool(CKA_EXTRACTABLE, true)]
        let (pubA, privA) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: dom,
                                                     privateTemplate: readable + [.ulong(CKA_VALUE_BITS, 256)])
        let (pubB, privB) = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: dom, privateTemplate: readable)
        func value(_ o: CK_OBJECT_HANDLE) throws -> [UInt8] {
            guard case .value(let v) = try f.rt.getAttributeValue(session: s, object: o, types: [CKA_VALUE])[0] else { return [] }
            return v
        }
        let (yA, yB, xA) = (try value(pubA), try value(pubB), try value(privA))
        guard case .value(let vb) = try f.rt.getAttributeValue(session: s, object: privA, types: [CKA_VALUE_BITS])[0] else { return }
        #expect(vb == AttributeCoding.ulong(CK_ULONG(FFCRules.bits(xA))) && FFCRules.bits(xA) <= 256)
        let generic: Template = [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_GENERIC_SECRET)] + readable
        let kA = try f.rt.deriveKey(session: s, mechanism: try h.mech(CKM_DH_PKCS_DERIVE, bytes: yB), baseKey: privA, template: generic)
        let kB = try f.rt.deriveKey(session: s, mechanism: try h.mech(CKM_DH_PKCS_DERIVE, bytes: yA), baseKey: privB, template: generic)
        let zA = try value(kA)
        let zB = try value(kB)
        #expect(zA.count == 128 && zA == zB, "both parties agree on Z, padded to the size of p")
        // Z = yB^xA mod p, by plain modular exponentiation.
        #expect(try FFC.publicValue(FFC.Domain(p: p, q: nil, g: yB), x: xA) == Array(zA.drop { $0 == 0 }))
        // CKA_VALUE_LEN: the trailing bytes (as SoftHSM2 cuts DH secrets).
        let aes = try f.rt.deriveKey(session: s, mechanism: try h.mech(CKM_DH_PKCS_DERIVE, bytes: yB), baseKey: privA,
                                     template: [.ulong(CKA_CLASS, CKO_SECRET_KEY), .ulong(CKA_KEY_TYPE, CKK_AES),
                                                .ulong(CKA_VALUE_LEN, 16)] + readable)
        #expect(try value(aes) == Array(zA.suffix(16)))
        // A peer value of 1, p - 1 or past p is refused; a DSA key is not a DH key.
        var pMinus1 = p
        pMinus1[pMinus1.count - 1] -= 1
        for bad in [[1], pMinus1, p + [0]] {
            #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: try h.mech(CKM_DH_PKCS_DERIVE, bytes: bad), baseKey: privA,
                                                template: generic) } == CKR_MECHANISM_PARAM_INVALID)
        }
        #expect(rv { _ = try h.mech(CKM_DH_PKCS_DERIVE, bytes: []) } == CKR_MECHANISM_PARAM_INVALID)
        let noDerive = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: dom,
                                                privateTemplate: [.bool(CKA_DERIVE, false)]).1
        #expect(rv { _ = try f.rt.deriveKey(session: s, mechanism: try h.mech(CKM_DH_PKCS_DERIVE, bytes: yB), baseKey: noDerive,
                                            template: generic) } == CKR_KEY_FUNCTION_NOT_PERMITTED)
        #expect(rv { _ = try f.rt.generateKeyPair(session: s, mechanism: gen, publicTemplate: dom,
                                                  privateTemplate: [.ulong(CKA_VALUE_BITS, 2048)]) } == CKR_ATTRIBUTE_VALUE_INVALID)
    }
}
