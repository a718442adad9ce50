import CPKCS11
import KeyshareCrypto

// CKM_AES_CMAC (the full 16-byte MAC) and CKM_AES_CMAC_GENERAL (the first
// 1-16 bytes, CK_MAC_GENERAL_PARAMS), PKCS #11 3.0 §2.11 / NIST SP 800-38B.
// Keys: CKK_AES secret keys with CKA_SIGN / CKA_VERIFY.

/// Sign and verify share one MAC computation (KeyshareCrypto's MACContext,
/// the one the SP 800-108 PRF uses); verify compares in constant time. A
/// running CMAC can be saved with C_GetOperationState, as an HMAC can.
final class CMACOperation: SignOperation, VerifyOperation, SaveableOperation {
    static let macSize = MACAlgorithm.cmacAES.outputSize
    let context: MACContext
    let signatureLength: Int
    /// The key, for C_SetOperationState's hAuthenticationKey check.
    let keyHandle: CK_OBJECT_HANDLE?

    init(key: [UInt8], macLength: Int, handle: CK_OBJECT_HANDLE?) throws {
        context = try MACContext(.cmacAES, key: key)
        signatureLength = macLength
        keyHandle = handle
    }

    private init(copying other: CMACOperation) throws {
        context = try other.context.copy()
        signatureLength = other.signatureLength
        keyHandle = other.keyHandle
    }

    func duplicate() throws -> any Operation { try CMACOperation(copying: self) }

    func update(_ part: [UInt8]) throws { try context.update(part) }
    func finish() throws -> [UInt8] { Array(try context.finish().prefix(signatureLength)) }

    func finish(signature: [UInt8]) throws {
        guard signature.count == signatureLength else { throw PKCS11Error.signatureLenRange }
        guard HMAC.equal(try finish(), signature) else { throw PKCS11Error.signatureInvalid }
    }
}

extension Runtime {
    /// The CMAC operation for an AES key whose `usage` flag (CKA_SIGN or CKA_VERIFY) is set.
    func cmacOperation(_ macLength: Int, _ view: ObjectView, usage: CK_ATTRIBUTE_TYPE) throws -> CMACOperation {
        guard view.objectClass == CKO_SECRET_KEY, view.keyType == CKK_AES else { throw PKCS11Error.keyTypeInconsistent }
        guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        guard let value = view.attributes[CKA_VALUE], [16, 24, 32].contains(value.count) else {
            throw PKCS11Error(CKR_KEY_SIZE_RANGE)
        }
        return try CMACOperation(key: value, macLength: macLength, handle: view.handle)
    }
}
