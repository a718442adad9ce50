import CPKCS11
import KeyshareCrypto

// C_WrapKey / C_UnwrapKey with a block cipher mode (PKCS #11 3.0 Current
// Mechanisms, AES §2.10 and DES3 §2.29): CKM_AES_ECB, CKM_AES_CBC,
// CKM_AES_CBC_PAD, CKM_DES3_ECB, CKM_DES3_CBC and CKM_DES3_CBC_PAD, under an
// AES key or a Triple DES key (CKK_DES3, or CKK_DES2 run as K1 K2 K1).
//
// - Without padding (ECB, CBC) only secret keys wrap: "the mechanism
//   encrypts the value of the CKA_VALUE attribute of the key that is
//   wrapped, padded on the trailing end with up to block size minus one null
//   bytes", and unwrapping "truncates the result according to the
//   CKA_KEY_TYPE attribute of the template and, if it has one, and the key
//   type supports it, the CKA_VALUE_LEN attribute". The cut is at most a
//   block minus one byte (what the padding added), so no template cuts a
//   blob down to a few guessable bytes.
// - With PKCS #7 padding (CBC_PAD) secret keys and private keys (PKCS #8)
//   wrap, as the spec's "can wrap and unwrap any secret key ... and RSA,
//   Diffie-Hellman, X9.42 DH, EC and DSA private keys" allows.
//
// None of these modes is authenticated, so KeyUsagePolicy's rule 6 keeps a
// sensitive key from being wrapped by them under a key that can unwrap (the
// padding oracle of CBC_PAD; for ECB and CBC, unwrapping a block or a prefix
// of the blob as a shorter key, which splits a key into parts found one by
// one), and rule 9 keeps a sensitive key from being wrapped under a Triple
// DES key weaker than itself. Single DES never wraps (56-bit key).

/// A block-cipher wrap mechanism and its parameters.
struct BlockWrap: Equatable {
    enum Cipher: Equatable { case aes, tripleDES }
    var cipher: Cipher
    /// The CBC IV; nil for ECB.
    var iv: [UInt8]?
    var pad: Bool

    /// The wrap mechanisms among the decoded ones, nil for any other.
    init?(_ m: Mechanism) {
        switch m {
        case .aesECB: self.init(cipher: .aes, iv: nil, pad: false)
        case .aesCBC(let iv, let pad): self.init(cipher: .aes, iv: iv, pad: pad)
        case .des(let d) where d.variant == .tripleDES:
            self.init(cipher: .tripleDES, iv: d.mode == .cbc ? d.iv : nil, pad: d.pad)
        default: return nil
        }
    }

    init(cipher: Cipher, iv: [UInt8]?, pad: Bool) {
        self.cipher = cipher
        self.iv = iv
        self.pad = pad
    }

    var blockSize: Int { cipher == .aes ? AESCBC.blockSize : DES.blockSize }

    /// The wrapping key types this mechanism takes.
    var keyTypes: Set<CK_KEY_TYPE> { cipher == .aes ? [CKK_AES] : [CKK_DES3, CKK_DES2] }

    /// The cipher key of a wrapping key of one of `keyTypes` (a DES2 key as
    /// K1 K2 K1); nil when its value has the wrong size.
    func cipherKey(_ value: [UInt8], keyType: CK_KEY_TYPE) -> [UInt8]? {
        switch keyType {
        case CKK_AES: return [16, 24, 32].contains(value.count) ? value : nil
        case CKK_DES3: return value.count == DES.Variant.tripleDES.keySize ? value : nil
        case CKK_DES2: return value.count == DES.twoKeySize ? DES.expandTwoKey(value) : nil
        default: return nil
        }
    }

    func wrappedLength(_ n: Int) -> Int {
        pad ? (n / blockSize + 1) * blockSize : (n + blockSize - 1) / blockSize * blockSize
    }

    /// One pass of the cipher over whole input (ECB and CBC without
    /// padding take whole blocks only; the callers see to that).
    private func run(key: [UInt8], _ data: [UInt8], encrypt: Bool) throws -> [UInt8] {
        switch (cipher, iv) {
        case (.aes, let iv?):
            return encrypt ? try AESCBC.encrypt(key: key, iv: iv, data: data, padding: pad)
                : try AESCBC.decrypt(key: key, iv: iv, data: data, padding: pad)
        case (.aes, nil):
            let ctx = try AESMode.ecb.context(key: key, iv: nil, encrypt: encrypt)
            return try ctx.update(data) + ctx.finish()
        case (.tripleDES, _):
            let ctx = try DES.context(.tripleDES, iv == nil ? .ecb : .cbc, key: key, iv: iv, encrypt: encrypt,
                                      padding: pad)
            return try ctx.update(data) + ctx.finish()
        }
    }

    func wrap(kek: [UInt8], _ material: [UInt8]) throws -> [UInt8] {
        var input = material
        defer { for i in input.indices { input[i] = 0 } }
        if !pad { input += [UInt8](repeating: 0, count: wrappedLength(material.count) - material.count) }
        return try run(key: kek, input, encrypt: true)
    }

    /// CKR_WRAPPED_KEY_LEN_RANGE for a length the mechanism never
    /// produces, CKR_WRAPPED_KEY_INVALID for bad padding.
    func unwrap(kek: [UInt8], _ wrapped: [UInt8]) throws -> [UInt8] {
        guard !wrapped.isEmpty, wrapped.count % blockSize == 0 else { throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE) }
        do {
            return try run(key: kek, wrapped, encrypt: false)
        } catch {
            throw PKCS11Error(CKR_WRAPPED_KEY_INVALID)
        }
    }

    /// The unpadded modes' cut of the opened bytes to the new key's length:
    /// the key type's one size, or CKA_VALUE_LEN, or (an AES or generic key
    /// without one) all of it. The length must be what zero padding to a
    /// whole block gives, else CKR_WRAPPED_KEY_INVALID; a length the key
    /// type never has is left to the key checks after this.
    func truncate(_ material: [UInt8], keyType: CK_KEY_TYPE, valueLength: CK_ULONG?) throws -> [UInt8] {
        guard !pad else { return material }
        let length: Int
        switch keyType {
        case CKK_DES: length = DES.Variant.des.keySize
        case CKK_DES2: length = DES.twoKeySize
        case CKK_DES3: length = DES.Variant.tripleDES.keySize
        case CKK_CHACHA20: length = AEADAlgorithm.chachaKeySize
        default:
            guard let valueLength else { return material }
            guard valueLength <= CK_ULONG(material.count) else { throw PKCS11Error(CKR_WRAPPED_KEY_INVALID) }
            length = Int(valueLength)
        }
        guard length <= material.count, material.count - length < blockSize else {
            throw PKCS11Error(CKR_WRAPPED_KEY_INVALID)
        }
        return Array(material[..<length])
    }
}
