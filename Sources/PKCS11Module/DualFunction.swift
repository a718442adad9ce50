import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.17: dual-function cryptographic operations, built from the
// two single operations. The cipher step runs first: a length query or a
// short buffer returns before the second operation sees the data, so both
// stay in step (the spec's rule for CKR_BUFFER_TOO_SMALL). Any error ends
// both operations (§5.2: only CKR_BUFFER_TOO_SMALL and a length query leave
// an operation active), whichever half it came from.

/// Runs the cipher half, then feeds `second` the bytes it must see (the
/// input for digest/sign-then-encrypt, the plaintext for decrypt-then-*).
private func dual(_ hSession: CK_SESSION_HANDLE, _ inBytes: UnsafeMutablePointer<CK_BYTE>?, _ inLen: CK_ULONG,
                  _ out: UnsafeMutablePointer<CK_BYTE>?, _ pulOut: UnsafeMutablePointer<CK_ULONG>?,
                  decrypting: Bool, other: OperationKind, _ second: (Runtime, [UInt8]) throws -> Void) throws -> CK_RV {
    try operationCall(hSession, [decrypting ? .decrypt : .encrypt, other]) { rt in
        let part = try input(inBytes, inLen)
        let cap = try capacity(out, pulOut)
        let r = decrypting ? try rt.decryptUpdate(session: hSession, part: part, capacity: cap)
            : try rt.encryptUpdate(session: hSession, part: part, capacity: cap)
        if case .bytes(let produced) = r { try second(rt, decrypting ? produced : part ?? []) }
        return deliver(r, out, pulOut)
    }
}

@c @implementation
public func ks_C_DigestEncryptUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ ulPartLen: CK_ULONG, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ pulEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DigestEncryptUpdate", "hSession=\(hSession)") {
        try dual(hSession, pPart, ulPartLen, pEncryptedPart, pulEncryptedPartLen, decrypting: false, other: .digest) {
            try $0.digestUpdate(session: hSession, part: $1)
        }
    }
}

@c @implementation
public func ks_C_DecryptDigestUpdate(_ hSession: CK_SESSION_HANDLE, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ ulEncryptedPartLen: CK_ULONG, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ pulPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptDigestUpdate", "hSession=\(hSession)") {
        try dual(hSession, pEncryptedPart, ulEncryptedPartLen, pPart, pulPartLen, decrypting: true, other: .digest) {
            try $0.digestUpdate(session: hSession, part: $1)
        }
    }
}

@c @implementation
public func ks_C_SignEncryptUpdate(_ hSession: CK_SESSION_HANDLE, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                   _ ulPartLen: CK_ULONG, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                   _ pulEncryptedPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_SignEncryptUpdate", "hSession=\(hSession)") {
        try dual(hSession, pPart, ulPartLen, pEncryptedPart, pulEncryptedPartLen, decrypting: false, other: .sign) {
            try $0.signUpdate(session: hSession, part: $1)
        }
    }
}

@c @implementation
public func ks_C_DecryptVerifyUpdate(_ hSession: CK_SESSION_HANDLE, _ pEncryptedPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ ulEncryptedPartLen: CK_ULONG, _ pPart: UnsafeMutablePointer<CK_BYTE>?,
                                     _ pulPartLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptVerifyUpdate", "hSession=\(hSession)") {
        try dual(hSession, pEncryptedPart, ulEncryptedPartLen, pPart, pulPartLen, decrypting: true, other: .verify) {
            try $0.verifyUpdate(session: hSession, part: $1)
        }
    }
}
