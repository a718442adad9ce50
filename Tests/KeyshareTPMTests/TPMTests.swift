import KeychainTestSupport
import KeyshareCrypto
@testable import KeyshareTPM
import Testing

/// The TPM layer against a real swtpm per test (docs/tpm.md).
@Suite(.serialized) struct TPMTests {
    static let auth = Array("object auth".utf8)

    func tpm() throws -> SoftwareTPM {
        try #require(try SoftwareTPM.start(), "swtpm is not installed (make deps)")
    }

    @Test func ecdsaKeysSignInTheTPM() throws {
        let sw = try tpm()
        for (kind, curve, md) in [(TPMKeyKind.p256, ECCurve.p256, DigestAlgorithm.sha256), (.p384, .p384, .sha384)] {
            let blob = try TPM.with(tcti: sw.tcti) { c -> [UInt8]? in
                guard c.supports(kind) else { return nil }
                return try c.createKey(kind, auth: Self.auth)
            }
            guard let blob else { continue }
            guard case .ec(let k, let x, let y) = try TPM.publicKey(ofBlob: blob), k == kind else { Issue.record("not EC"); continue }
            let pub = try PublicKey(curve: curve, point: [0x04] + x + y)
            let digest = md.hash(Array("hello".utf8))
            let sig = try TPM.with(tcti: sw.tcti) { try $0.signECDSA(blob: blob, auth: Self.auth, digest: digest) }
            #expect(sig.count == 2 * kind.size)
            #expect(try pub.verify(signature: sig, digest: digest, algorithm: .ecdsa(md)))
            // A SHA-1 digest is the same integer zero-padded; SHA-512 keeps its leftmost bytes.
            for d in [DigestAlgorithm.sha1, .sha512] {
                let h = d.hash(Array("x".utf8))
                let s = try TPM.with(tcti: sw.tcti) {
                    try $0.signECDSA(blob: blob, auth: Self.auth, digest: TPM.ecdsaInput(h, curveSize: kind.size))
                }
                #expect(try pub.verify(signature: s, digest: h, algorithm: .ecdsa(nil)))
            }
        }
    }

    @Test func rsaKeysSignAndDecryptInTheTPM() throws {
        let sw = try tpm()
        let blob = try TPM.with(tcti: sw.tcti) { try $0.createKey(.rsa2048, auth: Self.auth) }
        guard case .rsa(_, let n, let e) = try TPM.publicKey(ofBlob: blob) else { Issue.record("not RSA"); return }
        #expect(n.count == 256 && e == [0x01, 0x00, 0x01])
        let pub = try PublicKey(rsaModulus: n, exponent: e)
        let digest = DigestAlgorithm.sha256.hash(Array("message".utf8))
        let em = try RSASignaturePadding.pkcs1(try RSASignaturePadding.digestInfo(digest, .sha256), modulusBytes: 256)
        let sig = try TPM.with(tcti: sw.tcti) { try $0.rsaDecrypt(blob: blob, auth: Self.auth, scheme: .raw, input: em) }
        #expect(try pub.verify(signature: sig, digest: digest, algorithm: .rsaPKCS1(.sha256)))
        for salt in [0, 32, 222] {
            let pss = try RSASignaturePadding.pss(digest: digest, hash: .sha256, mgf1: .sha256, saltLength: salt, modulusBits: 2048)
            let s = try TPM.with(tcti: sw.tcti) { try $0.rsaDecrypt(blob: blob, auth: Self.auth, scheme: .raw, input: pss) }
            #expect(try pub.verify(signature: s, digest: digest, algorithm: .rsaPSS(.sha256, mgf1: .sha256, saltLength: salt)))
        }
        let secret = Array("a session key".utf8)
        let c1 = try pub.encrypt(secret, padding: .pkcs1)
        let c2 = try pub.encrypt(secret, padding: .oaep(.sha256, mgf1: .sha256, label: []))
        try TPM.with(tcti: sw.tcti) { c throws in
            #expect(try c.rsaDecrypt(blob: blob, auth: Self.auth, scheme: .pkcs1, input: c1) == secret)
            #expect(try c.rsaDecrypt(blob: blob, auth: Self.auth, scheme: .oaep(hashAlgorithm: 0x000B), input: c2) == secret)
        }
    }

    /// Every call flushes what it loaded: far more operations than the TPM's 3 transient slots.
    @Test func transientObjectsAreFlushed() throws {
        let sw = try tpm()
        let blob = try TPM.with(tcti: sw.tcti) { try $0.createKey(.p256, auth: Self.auth) }
        let sealed = try TPM.with(tcti: sw.tcti) { try $0.seal([UInt8](repeating: 7, count: 32), noDA: true) }
        try TPM.with(tcti: sw.tcti) { c throws in
            for _ in 0..<20 {
                _ = try c.signECDSA(blob: blob, auth: Self.auth, digest: [UInt8](repeating: 1, count: 32))
                _ = try c.unseal(sealed)
            }
        }
        for _ in 0..<10 {
            _ = try TPM.with(tcti: sw.tcti) { try $0.signECDSA(blob: blob, auth: Self.auth, digest: [UInt8](repeating: 2, count: 32)) }
        }
    }

    @Test func sealingBindsToThisTPMAndItsPCRs() throws {
        let sw = try tpm()
        let secret = try SecureRandom.bytes(32)
        let plain = try TPM.with(tcti: sw.tcti) { try $0.seal(secret, noDA: true) }
        let bound = try TPM.with(tcti: sw.tcti) { try $0.seal(secret, noDA: true, pcrs: [7]) }
        try TPM.with(tcti: sw.tcti) { c throws in
            #expect(try c.unseal(plain) == secret)
            #expect(try c.unseal(bound, pcrs: [7]) == secret)
        }
        // Switched off and on: same TPM, PCRs back at their reset values.
        try sw.restart()
        try TPM.with(tcti: sw.tcti) { c throws in
            #expect(try c.unseal(plain) == secret)
            #expect(try c.unseal(bound, pcrs: [7]) == secret)
            try c.extendPCR(7, digest: DigestAlgorithm.sha256.hash(Array("boot something else".utf8)))
            #expect(try c.unseal(plain) == secret)
            let e = #expect(throws: TPMError.self) { try c.unseal(bound, pcrs: [7]) }
            #expect(e?.kind == .policyFailed)
        }
        // Another machine's TPM cannot load the blob at all.
        let other = try tpm()
        let ek = try TPM.with(tcti: sw.tcti) { try $0.endorsementKeyPublic() }
        try TPM.with(tcti: other.tcti) { c throws in
            let e = #expect(throws: TPMError.self) { try c.unseal(plain) }
            #expect(e?.kind == .foreignObject)
            #expect(try c.endorsementKeyPublic() != ek)
        }
    }

    /// A wrong authorization is counted by the TPM; past its limit the TPM locks out.
    @Test func wrongAuthIsCountedByTheTPM() throws {
        let sw = try tpm()
        let secret = try SecureRandom.bytes(32)
        let sealed = try TPM.with(tcti: sw.tcti) { try $0.seal(secret, auth: Self.auth, noDA: false) }
        var kinds: [TPMError.Kind] = []
        try TPM.with(tcti: sw.tcti) { c throws in
            for _ in 0..<12 {
                do {
                    _ = try c.unseal(sealed, auth: Array("wrong".utf8))
                } catch let e as TPMError {
                    kinds.append(e.kind)
                }
            }
            // Locked out: even the right authorization is refused now.
            let e = #expect(throws: TPMError.self) { try c.unseal(sealed, auth: Self.auth) }
            #expect(e?.kind == .lockout)
        }
        #expect(kinds.first == .authFailed)
        #expect(kinds.last == .lockout)
    }

    @Test func importedKeysSignInTheTPM() throws {
        let sw = try tpm()
        let ec = try PrivateKey.generateEC(.p256)
        let point = try #require(ec.publicKey.ecPoint)
        let blob = try TPM.with(tcti: sw.tcti) {
            try $0.importEC(.p256, d: try ec.ecPrivateScalar(), x: Array(point[1...32]), y: Array(point[33...64]), auth: Self.auth)
        }
        let digest = DigestAlgorithm.sha256.hash(Array("imported".utf8))
        let sig = try TPM.with(tcti: sw.tcti) { try $0.signECDSA(blob: blob, auth: Self.auth, digest: digest) }
        #expect(try ec.publicKey.verify(signature: sig, digest: digest, algorithm: .ecdsa(.sha256)))

        let rsa = try PrivateKey.generateRSA(bits: 2048)
        let c = try rsa.rsaPrivateComponents()
        let n = try #require(rsa.publicKey.rsaModulus)
        let rblob = try TPM.with(tcti: sw.tcti) {
            try $0.importRSA(.rsa2048, modulus: Array(n.drop { $0 == 0 }), exponent: 65537, prime: c.p, auth: Self.auth)
        }
        let em = try RSASignaturePadding.pkcs1(try RSASignaturePadding.digestInfo(digest, .sha256), modulusBytes: 256)
        let rsig = try TPM.with(tcti: sw.tcti) { try $0.rsaDecrypt(blob: rblob, auth: Self.auth, scheme: .raw, input: em) }
        #expect(try rsa.publicKey.verify(signature: rsig, digest: digest, algorithm: .rsaPKCS1(.sha256)))
    }

    /// Key attestation (issue 31): TPM2_Certify by a per-seed AK that the TPM derives again
    /// identically; the TPMS_ATTEST carries the nonce and the key's Name; no EK certificate on
    /// a bare swtpm; a credential file that is none is refused before the TPM is asked.
    @Test func certifyByTheAttestationKey() throws {
        let sw = try tpm()
        let seed = DigestAlgorithm.sha256.hash(Array("token".utf8)), other = DigestAlgorithm.sha256.hash(Array("other".utf8))
        let nonce: [UInt8] = Array(0..<32)
        let (blob, cert, ak1, ak2, akOther, nv) = try TPM.with(tcti: sw.tcti) { c in
            let blob = try c.createKey(.p256, auth: Self.auth)
            return (blob, try c.certify(blob: blob, auth: Self.auth, seed: seed, qualifyingData: nonce),
                    try c.attestationKeyPublic(seed: seed), try c.attestationKeyPublic(seed: seed),
                    try c.attestationKeyPublic(seed: other), try c.readNV(TPMEndorsementKind.rsa.certificateIndex))
        }
        #expect(ak1 == ak2 && ak1 == cert.akPublic && ak1 != akOther)
        #expect(cert.keyPublic == (try TPM.publicArea(ofBlob: blob)))
        #expect(Array(cert.attest.prefix(6)) == [0xFF, 0x54, 0x43, 0x47, 0x80, 0x17])  // TPM_GENERATED_VALUE, TPM_ST_ATTEST_CERTIFY
        // qualifiedSigner (2 + 34 bytes), then extraData: the nonce.
        #expect(Array(cert.attest[42..<44]) == [0, 32] && Array(cert.attest[44..<76]) == nonce)
        // The body ends with the certified Name and qualified name, 2 + 34 bytes each.
        let name = try TPM.name(ofPublicArea: cert.keyPublic)
        #expect(Array(cert.attest.suffix(72).prefix(36)) == [0, 34] + name)
        #expect(TPM.objectAttributes(ofPublicArea: cert.keyPublic).map { $0 & 0x32 == 0x32 } == true)
        #expect(Array(cert.signature.prefix(4)) == [0x00, 0x18, 0x00, 0x0B])  // ECDSA, SHA-256
        #expect(nv == nil)
        let e = #expect(throws: TPMError.self) {
            try TPM.with(tcti: sw.tcti) { try $0.activateCredential(seed: seed, ek: .rsa, credential: [1, 2, 3, 4, 5, 6, 7, 8, 9]) }
        }
        #expect(e?.rc == 0x004B_0001)  // KTPM_RC_BAD_BLOB
    }

    @Test func noTPMIsUnreachable() throws {
        let sw = try tpm()
        let tcti = sw.tcti
        sw.stop()
        let e = #expect(throws: TPMError.self) { try TPM.with(tcti: tcti) { try $0.endorsementKeyPublic() } }
        #expect(e?.kind == .unreachable)
        #expect(!TPM.isReachable(tcti: tcti))
        #expect(!TPM.isReachable(tcti: "device:/nonexistent/tpm"))
    }
}
