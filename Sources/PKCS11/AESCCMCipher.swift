import CPKCS11
import KeyshareCrypto

// CKM_AES_CCM with CK_CCM_PARAMS (PKCS #11 3.0 Current Mechanisms §2.12;
// NIST SP 800-38C, RFC 3610). Output of encryption: ciphertext ‖ MAC; input
// of decryption the same. ulDataLen is the plaintext's length: CCM encodes
// it in the first block, so the whole payload must be known before any of
// it is processed. Multi-part calls therefore collect their input and
// C_EncryptUpdate / C_DecryptUpdate return no bytes (the spec allows it);
// C_*Final runs CCM once and, on decryption, releases plaintext only after
// the MAC is verified.

final class CCMOperation: CipherOperation {
    /// The most a CCM operation collects (64 MiB, as GCM decryption).
    static let maxData = 1 << 26
    let key: [UInt8]
    let parameters: CCMParameters
    let encrypting: Bool
    var buffer: [UInt8] = []

    init(key: [UInt8], parameters: CCMParameters, encrypting: Bool) throws {
        // Fails here, at Init, if this OpenSSL lacks CCM.
        guard [16, 24, 32].contains(key.count) else { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
        self.key = key
        self.parameters = parameters
        self.encrypting = encrypting
    }

    deinit { for i in buffer.indices { buffer[i] = 0 } }

    /// The input a complete operation takes: ulDataLen, plus the MAC on decryption.
    var expectedInput: Int { parameters.dataLength + (encrypting ? 0 : parameters.tagLength) }
    var lengthError: PKCS11Error { PKCS11Error(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE) }

    func outputLength(input: Int) -> Int {
        encrypting ? input + parameters.tagLength : Swift.max(0, input - parameters.tagLength)
    }
    func updateOutputLength(input: Int) -> Int { 0 }
    var finalOutputLength: Int { outputLength(input: buffer.count) }

    func oneShot(_ data: [UInt8]) throws -> [UInt8] {
        buffer = data
        return try finish()
    }

    func update(_ part: [UInt8]) throws -> [UInt8] {
        // More than ulDataLen (+ MAC) can never finish: say so now.
        guard buffer.count + part.count <= expectedInput else { throw lengthError }
        buffer += part
        return []
    }

    func finish() throws -> [UInt8] {
        guard buffer.count == expectedInput else { throw lengthError }
        let p = parameters
        do {
            if encrypting {
                let (ct, tag) = try AESCCM.encrypt(key: key, nonce: p.nonce, plaintext: buffer, aad: p.aad,
                                                   tagLength: p.tagLength)
                return ct + tag
            }
            let split = buffer.count - p.tagLength
            return try AESCCM.decrypt(key: key, nonce: p.nonce, ciphertext: Array(buffer[..<split]),
                                      tag: Array(buffer[split...]), aad: p.aad)
        } catch let e as CryptoError where e.kind == .authenticationFailed {
            throw PKCS11Error(CKR_ENCRYPTED_DATA_INVALID)
        } catch let e as CryptoError where e.kind == .unsupported {
            throw PKCS11Error.mechanismInvalid
        }
    }
}
