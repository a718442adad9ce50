import Testing
import KeychainTestSupport
@testable import Keychain
import KeyshareCrypto
import Tokens

@Suite struct TokenManagerTests {
    @Test func softTokenIDsAndResolution() throws {
        let home = TempHome()
        let store = try home.store()
        let m = TokenManager(store: store)
        #expect(throws: TokensError.noTokens) { _ = try m.resolveToken(nil) }
        let a = try m.createSoftToken(label: "Alpha", soPIN: soPIN, userPIN: userPIN)
        #expect(a.tokenID.driverClass == SoftToken.driverClass)
        #expect(a.tokenID.instance.count == 16 && a.serial == a.tokenID.instance)
        #expect(try m.resolveToken(nil).tokenID == a.tokenID)
        let b = try m.createSoftToken(label: "Beta", soPIN: soPIN, userPIN: userPIN)
        #expect(try m.resolveToken("Beta").tokenID == b.tokenID)
        #expect(try m.resolveToken(a.tokenID.description).tokenID == a.tokenID)
        #expect(try m.resolveToken(b.serial).tokenID == b.tokenID)
        #expect {
            _ = try m.resolveToken(nil)
        } throws: { e in
            let text = "\(e)"
            return text.contains("Alpha") && text.contains("Beta")
        }
        #expect {
            _ = try m.resolveToken("Gamma")
        } throws: { e in
            guard case TokensError.unknownToken(_, let choices) = e else { return false }
            return choices.count == 2
        }
        try m.deleteToken(b.tokenID)
        #expect(try m.tokens().map(\.tokenID) == [a.tokenID])
    }

    @Test(arguments: [KeySpec.rsa(bits: 2048), .ec(.p384), .ed25519])
    func generatedKeyPairs(_ spec: KeySpec) throws {
        let env = try Env()
        let (priv, pub) = try env.manager.generateKeyPair(spec, label: "gen", into: env.token.tokenID, key: env.key)
        let a = try env.store.item(priv, key: env.key).attributes
        #expect(a.bool(CKA.local) == true)
        #expect(a.bool(CKA.alwaysSensitive) == true)
        #expect(a.bool(CKA.neverExtractable) == true)
        #expect(a.bool(CKA.extractable) == false)
        let pubItem = try env.store.item(pub, key: nil)
        #expect(pubItem.attributes[CKA.id] == a[CKA.id])
        let pk = try env.manager.privateKey(priv, key: env.key)
        let msg = Array("message".utf8)
        let alg: SignatureAlgorithm
        switch spec {
        case .rsa: alg = .rsaPKCS1(.sha256)
        case .ec: alg = .ecdsa(.sha384)
        case .ed25519: alg = .ed25519
        case .postQuantum: return  // postQuantumKeyPairs
        }
        let sig = try pk.sign(message: msg, algorithm: alg)
        let publicKey: PublicKey
        switch spec {
        case .rsa:
            publicKey = try PublicKey(rsaModulus: pubItem.attributes[CKA.modulus]!, exponent: pubItem.attributes[CKA.publicExponent]!)
        case .ec:
            publicKey = try PublicKey(ecParams: pubItem.attributes[CKA.ecParams]!, point: pubItem.attributes[CKA.ecPoint]!)
        case .ed25519:
            #expect(pubItem.attributes[CKA.ecParams] == ObjectTemplates.ed25519Params)
            publicKey = try PublicKey(ed25519Raw: Array(pubItem.attributes[CKA.ecPoint]!.dropFirst(2)))
        case .postQuantum: return
        }
        #expect(try publicKey.verify(signature: sig, message: msg, algorithm: alg))
    }

    /// Issue 18: a post-quantum pair goes into the keychain with its PKCS #11 3.2 attributes (key type,
    /// CKA_PARAMETER_SET, the public key's CKA_VALUE) and comes back out of the sealed PKCS #8 as the
    /// same key, which signs (or decapsulates) for the stored public half.
    @Test(.enabled(if: CryptoEngine.hasPostQuantum),
          arguments: [KeyType.mlDSA(.mlDSA65), .mlKEM(.mlKEM768), .slhDSA(.sha2_128f)])
    func postQuantumKeyPairs(_ type: KeyType) throws {
        let env = try Env()
        let (priv, pub) = try env.manager.generateKeyPair(.postQuantum(type), label: "pq", into: env.token.tokenID, key: env.key)
        let a = try env.store.item(priv, key: env.key).attributes
        let p = try env.store.item(pub, key: nil).attributes
        #expect(a.ulong(CKA.keyType) == ObjectTemplates.keyType(type) && p.ulong(CKA.keyType) == a.ulong(CKA.keyType))
        #expect(a.ulong(CKA.parameterSet) == ObjectTemplates.parameterSet(type))
        #expect(p.ulong(CKA.parameterSet) == ObjectTemplates.parameterSet(type))
        #expect(a.ulong(CKA.keyGenMechanism) == ObjectTemplates.mechanism(type))
        #expect(a[CKA.value] == nil)  // the private value lives only in the sealed PKCS #8
        let raw = try #require(p[CKA.value])
        let pk = try env.manager.privateKey(priv, key: env.key)
        #expect(pk.keyType == type)
        #expect(pk.publicKey.postQuantumRaw == raw)
        let publicKey = try PublicKey(postQuantum: type, raw: raw)
        #expect(try publicKey.spkiDER() == p[CKA.publicKeyInfo])
        let msg = Array("message".utf8)
        switch type {
        case .mlDSA:
            #expect(a.bool(CKA.sign) == true && p.bool(CKA.verify) == true)
            #expect(try publicKey.verify(signature: pk.sign(message: msg, algorithm: .mlDSA), message: msg, algorithm: .mlDSA))
        case .slhDSA:
            #expect(try publicKey.verify(signature: pk.sign(message: msg, algorithm: .slhDSA), message: msg, algorithm: .slhDSA))
        case .mlKEM:
            #expect(a.bool(CKA.decapsulate) == true && p.bool(CKA.encapsulate) == true)
            #expect(a.bool(CKA.sign) == false && a.bool(CKA.decrypt) == false)
            let (ct, ss) = try #require(publicKey.mlKEM).encapsulate()
            #expect(try #require(pk.mlKEM).decapsulate(ct) == ss)
        default: Issue.record("not a post-quantum type")
        }
    }

    @Test func ckDate() {
        #expect(ObjectTemplates.ckDate(0) == Array("19700101".utf8))
        #expect(ObjectTemplates.ckDate(951_782_400) == Array("20000229".utf8))
        #expect(ObjectTemplates.ckDate(2_208_988_799) == Array("20391231".utf8))
    }
}
