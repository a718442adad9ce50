import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.13: dual-function cryptographic operations. Each needs two
// active operations of which one is a cipher; until the cipher chapter lands
// there is never such a pair, so after the usual checks they report that.

private func dual(_ hSession: CK_SESSION_HANDLE, _ pulLen: UnsafeMutablePointer<CK_ULONG>?) throws -> CK_RV {
    _ = try runtime().session(hSession)
    guard pulLen != nil else { throw PKCS11Error.argumentsBad }
    return CKR_OPERATION_NOT_INITIALIZED
}

@c @implementation
public func ks_C_DigestEncryptUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ ulPartLen: CK_ULONG, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ pulEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DigestEncryptUpdate", "hSession=\(hSession)") { try dual(hSession, pulEncryptedPartLen) }
}

@c @implementation
public func ks_C_DecryptDigestUpdate(_ hSession: CK_SESSION_HANDLE, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ ulEncryptedPartLen: CK_ULONG, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ pulPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptDigestUpdate", "hSession=\(hSession)") { try dual(hSession, pulPartLen) }
}

@c @implementation
public func ks_C_SignEncryptUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                   _ ulPartLen: CK_ULONG, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                   _ pulEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_SignEncryptUpdate", "hSession=\(hSession)") { try dual(hSession, pulEncryptedPartLen) }
}

@c @implementation
public func ks_C_DecryptVerifyUpdate(_ hSession: CK_SESSION_HANDLE, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ ulEncryptedPartLen: CK_ULONG, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ pulPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptVerifyUpdate", "hSession=\(hSession)") { try dual(hSession, pulPartLen) }
}
