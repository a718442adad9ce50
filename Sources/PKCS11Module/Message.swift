import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.13-5.16 (message-based encryption, decryption, signing and
// verifying): not supported. Each still checks initialisation and the session,
// so a caller sees CKR_CRYPTOKI_NOT_INITIALIZED or CKR_SESSION_HANDLE_INVALID
// before CKR_FUNCTION_NOT_SUPPORTED, in the spec's order.

private func unsupported(_ hSession: CK_SESSION_HANDLE) throws -> CK_RV {
    _ = try runtime().session(hSession)
    return CKR_FUNCTION_NOT_SUPPORTED
}

@c @implementation
public func ks_C_MessageEncryptInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?, _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_MessageEncryptInit", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_EncryptMessage(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG, _ pPlaintext: UnsafeMutablePointer<CK_BYTE>?, _ ulPlaintextLen: CK_ULONG, _ pCiphertext: UnsafeMutablePointer<CK_BYTE>?, _ pulCiphertextLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_EncryptMessage", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_EncryptMessageBegin(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG) -> CK_RV {
    entry("C_EncryptMessageBegin", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_EncryptMessageNext(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pPlaintextPart: UnsafeMutablePointer<CK_BYTE>?, _ ulPlaintextPartLen: CK_ULONG, _ pCiphertextPart: UnsafeMutablePointer<CK_BYTE>?, _ pulCiphertextPartLen: UnsafeMutablePointer<CK_ULONG>?, _ flags: CK_FLAGS) -> CK_RV {
    entry("C_EncryptMessageNext", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_MessageEncryptFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_MessageEncryptFinal", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_MessageDecryptInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?, _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_MessageDecryptInit", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_DecryptMessage(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG, _ pCiphertext: UnsafeMutablePointer<CK_BYTE>?, _ ulCiphertextLen: CK_ULONG, _ pPlaintext: UnsafeMutablePointer<CK_BYTE>?, _ pulPlaintextLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptMessage", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_DecryptMessageBegin(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG) -> CK_RV {
    entry("C_DecryptMessageBegin", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_DecryptMessageNext(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pCiphertextPart: UnsafeMutablePointer<CK_BYTE>?, _ ulCiphertextPartLen: CK_ULONG, _ pPlaintextPart: UnsafeMutablePointer<CK_BYTE>?, _ pulPlaintextPartLen: UnsafeMutablePointer<CK_ULONG>?, _ flags: CK_FLAGS) -> CK_RV {
    entry("C_DecryptMessageNext", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_MessageDecryptFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_MessageDecryptFinal", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_MessageSignInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?, _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_MessageSignInit", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_SignMessage(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG, _ pSignature: UnsafeMutablePointer<CK_BYTE>?, _ pulSignatureLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_SignMessage", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_SignMessageBegin(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG) -> CK_RV {
    entry("C_SignMessageBegin", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_SignMessageNext(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG, _ pSignature: UnsafeMutablePointer<CK_BYTE>?, _ pulSignatureLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_SignMessageNext", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_MessageSignFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_MessageSignFinal", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_MessageVerifyInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?, _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_MessageVerifyInit", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_VerifyMessage(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG, _ pSignature: UnsafeMutablePointer<CK_BYTE>?, _ ulSignatureLen: CK_ULONG) -> CK_RV {
    entry("C_VerifyMessage", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_VerifyMessageBegin(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG) -> CK_RV {
    entry("C_VerifyMessageBegin", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_VerifyMessageNext(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pData: UnsafeMutablePointer<CK_BYTE>?, _ ulDataLen: CK_ULONG, _ pSignature: UnsafeMutablePointer<CK_BYTE>?, _ ulSignatureLen: CK_ULONG) -> CK_RV {
    entry("C_VerifyMessageNext", "hSession=\(hSession)") { try unsupported(hSession) }
}

@c @implementation
public func ks_C_MessageVerifyFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_MessageVerifyFinal", "hSession=\(hSession)") { try unsupported(hSession) }
}
