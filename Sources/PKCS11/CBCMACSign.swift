import CPKCS11
import KeyshareCrypto

// CBC-MAC: CKM_AES_MAC (8 bytes, half the block), CKM_AES_MAC_GENERAL
// (1-16 bytes, CK_MAC_GENERAL_PARAMS), CKM_DES3_MAC (4 bytes) and
// CKM_DES3_MAC_GENERAL (1-8 bytes); PKCS #11 3.0 Current Mechanisms §2.10
// and §2.29 ("general-length ... MAC", FIPS 113). Keys: CKK_AES for the AES
// pair, CKK_DES3 or CKK_DES2 (two-key, K1 K2 K1) for the 3DES pair, with
// CKA_SIGN / CKA_VERIFY. The MAC is KeyshareCrypto's CBCMAC: zero IV, the
// last partial block zero-padded (empty data: one zero block), the leftmost
// bytes of the last block. Plain CBC-MAC is secure only for messages of
// one fixed length; CKM_AES_CMAC is the MAC to use, these are for old peers.

/// Sign and verify share the computation; verify compares in constant time.
final class CBCMACOperation: SignOperation, VerifyOperation {
    let mac: CBCMAC
    let signatureLength: Int

    init(_ mac: CBCMAC, length: Int) {
        self.mac = mac
        signatureLength = length
    }

    func update(_ part: [UInt8]) throws { try mac.update(part) }
    func finish() throws -> [UInt8] { Array(try mac.finish().prefix(signatureLength)) }

    func finish(signature: [UInt8]) throws {
        guard signature.count == signatureLength else { throw PKCS11Error.signatureLenRange }
        guard HMAC.equal(try finish(), signature) else { throw PKCS11Error.signatureInvalid }
    }
}

extension Runtime {
    /// The CBC-MAC operation for a key whose `usage` flag (CKA_SIGN or CKA_VERIFY) is set.
    func cbcMACOperation(_ m: CBCMACMechanism, _ view: ObjectView, usage: CK_ATTRIBUTE_TYPE) throws -> CBCMACOperation {
        let ecb: CipherContext
        switch m.cipher {
        case .aes:
            guard view.objectClass == CKO_SECRET_KEY, view.keyType == CKK_AES else { throw PKCS11Error.keyTypeInconsistent }
            guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
            guard let value = view.attributes[CKA_VALUE], [16, 24, 32].contains(value.count) else {
                throw PKCS11Error(CKR_KEY_SIZE_RANGE)
            }
            ecb = try AESMode.ecb.context(key: value, iv: nil, encrypt: true)
        case .tripleDES:
            guard view.objectClass == CKO_SECRET_KEY, view.keyType == CKK_DES3 || view.keyType == CKK_DES2 else {
                throw PKCS11Error.keyTypeInconsistent
            }
            guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
            ecb = try DES.context(.tripleDES, .ecb, key: try desKey(view, .tripleDES), iv: nil, encrypt: true, padding: false)
        }
        return CBCMACOperation(CBCMAC(ecb: ecb), length: m.macLength)
    }
}
