import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 3.0 §5.13-5.14: message-based encryption and decryption
// (Sources/PKCS11/MessageCrypto.swift has the rules). Each entry checks, in
// order: initialisation, the session (§5.1.7), an active process (whose
// mechanism says how to read the per-message parameter), then its
// arguments. An error in C_*MessageBegin / C_*MessageNext ends the message
// in progress, argument errors found here included; the process goes on.
//
// §5.15-5.16, message-based signing and verifying: not supported (no 3.0
// mechanism uses them). Each still checks initialisation and the session,
// so a caller sees CKR_CRYPTOKI_NOT_INITIALIZED or CKR_SESSION_HANDLE_INVALID
// before CKR_FUNCTION_NOT_SUPPORTED, in the spec's order.

private func unsupported(_ hSession: CK_SESSION_HANDLE) throws -> CK_RV {
    _ = try runtime().session(hSession)
    return CKR_FUNCTION_NOT_SUPPORTED
}

/// C_MessageEncryptInit / C_MessageDecryptInit; a NULL pMechanism ends the
/// active process (as for C_EncryptInit, §5.8).
private func messageInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?,
                         _ hKey: CK_OBJECT_HANDLE, encrypt: Bool) throws -> CK_RV {
    let rt = try runtime()
    let s = try rt.session(hSession)
    guard let m = pMechanism?.pointee else {
        s.endOperations([encrypt ? .messageEncrypt : .messageDecrypt])
        return CKR_OK
    }
    let len = try length(m.ulParameterLen)
    var parameter: UnsafeRawBufferPointer?
    if len > 0 {
        guard let p = m.pParameter else { throw PKCS11Error.argumentsBad }
        parameter = UnsafeRawBufferPointer(start: p, count: len)
    }
    let mechanism = try MessageMechanism(type: m.mechanism, parameter: parameter)
    // CKA_ALLOWED_MECHANISMS is checked where the key is resolved (AllowedMechanisms.swift).
    try rt.messageInit(session: s, encrypt: encrypt, mechanism: mechanism, key: hKey, allowing: m.mechanism)
    return CKR_OK
}

/// The per-message parameter (CK_GCM_MESSAGE_PARAMS or
/// CK_SALSA20_CHACHA20_POLY1305_MSG_PARAMS) of the active process.
private func messageParameter(_ rt: Runtime, _ hSession: CK_SESSION_HANDLE, encrypt: Bool, _ p: UnsafeMutableRawPointer?,
                              _ n: CK_ULONG, readTag: Bool) throws -> (MessageParameters, MessageParameters.Pointers) {
    let mechanism = try rt.messageMechanism(session: hSession, encrypt: encrypt)
    guard let p, let count = Int(exactly: n), count > 0 else { throw PKCS11Error.argumentsBad }
    return try MessageParameters.decode(mechanism, UnsafeRawBufferPointer(start: p, count: count), readTag: readTag)
}

/// Writes a generated IV and a tag back into the caller's parameter.
private func writeBack(_ out: MessageOutput, _ ptrs: MessageParameters.Pointers) {
    guard case .bytes = out.result else { return }
    if let iv = out.iv, iv.count == ptrs.ivLength, let dst = ptrs.iv { dst.copyMemory(from: iv, byteCount: iv.count) }
    if let tag = out.tag, tag.count == ptrs.tagLength, let dst = ptrs.tag { dst.copyMemory(from: tag, byteCount: tag.count) }
}

/// CKF_END_OF_MESSAGE or 0; anything else is CKR_ARGUMENTS_BAD.
private func lastPart(_ flags: CK_FLAGS) throws -> Bool {
    switch flags {
    case 0: return false
    case CK_FLAGS(CKF_END_OF_MESSAGE): return true
    default: throw PKCS11Error.argumentsBad
    }
}

/// Runs a Begin or Next call; any error ends the message in progress.
private func inMessage(_ rt: Runtime, _ hSession: CK_SESSION_HANDLE, encrypt: Bool, _ body: () throws -> CK_RV) throws -> CK_RV {
    do {
        let rv = try body()
        if rv != CKR_OK, rv != CKR_BUFFER_TOO_SMALL { rt.abandonMessage(session: hSession, encrypt: encrypt) }
        return rv
    } catch let e as PKCS11Error where e == .operationNotInitialized {
        throw e
    } catch {
        rt.abandonMessage(session: hSession, encrypt: encrypt)
        throw error
    }
}

@c @implementation
public func ks_C_MessageEncryptInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?, _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_MessageEncryptInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try messageInit(hSession, pMechanism, hKey, encrypt: true)
    }
}

@c @implementation
public func ks_C_EncryptMessage(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG, _ pPlaintext: UnsafeMutablePointer<CK_BYTE>?, _ ulPlaintextLen: CK_ULONG, _ pCiphertext: UnsafeMutablePointer<CK_BYTE>?, _ pulCiphertextLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_EncryptMessage", "hSession=\(hSession) len=\(ulPlaintextLen)") {
        let rt = try runtime()
        let s = try rt.session(hSession)
        // Straight between the caller's buffers (no copy of the message);
        // the parameter is read with the process's mechanism inside.
        let n = try length(ulParameterLen)
        let (out, ptrs) = try rt.encryptMessage(session: s, parameter: pParameter.map { UnsafeRawBufferPointer(start: $0, count: n) },
                                                aad: try rawInput(pAssociatedData, ulAssociatedDataLen),
                                                plaintext: try rawInput(pPlaintext, ulPlaintextLen),
                                                output: pCiphertext, capacity: try capacity(pCiphertext, pulCiphertextLen))
        if case .written = out.result { writeBack(MessageOutput(result: .bytes([]), iv: out.iv, tag: out.tag), ptrs) }
        return deliverDirect(out.result, pulCiphertextLen)
    }
}

@c @implementation
public func ks_C_EncryptMessageBegin(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG) -> CK_RV {
    entry("C_EncryptMessageBegin", "hSession=\(hSession)") {
        let rt = try runtime(session: hSession)
        return try inMessage(rt, hSession, encrypt: true) {
            let (params, ptrs) = try messageParameter(rt, hSession, encrypt: true, pParameter, ulParameterLen, readTag: false)
            let iv = try rt.messageBegin(session: hSession, encrypt: true, parameters: params,
                                         aad: try input(pAssociatedData, ulAssociatedDataLen))
            writeBack(MessageOutput(result: .bytes([]), iv: iv, tag: nil), ptrs)
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_EncryptMessageNext(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pPlaintextPart: UnsafeMutablePointer<CK_BYTE>?, _ ulPlaintextPartLen: CK_ULONG, _ pCiphertextPart: UnsafeMutablePointer<CK_BYTE>?, _ pulCiphertextPartLen: UnsafeMutablePointer<CK_ULONG>?, _ flags: CK_FLAGS) -> CK_RV {
    entry("C_EncryptMessageNext", "hSession=\(hSession) len=\(ulPlaintextPartLen) flags=0x\(String(flags, radix: 16))") {
        let rt = try runtime(session: hSession)
        return try inMessage(rt, hSession, encrypt: true) {
            let (params, ptrs) = try messageParameter(rt, hSession, encrypt: true, pParameter, ulParameterLen, readTag: false)
            let out = try rt.encryptMessageNext(session: hSession, parameters: params,
                                                part: try input(pPlaintextPart, ulPlaintextPartLen),
                                                capacity: try capacity(pCiphertextPart, pulCiphertextPartLen),
                                                last: try lastPart(flags))
            writeBack(out, ptrs)
            return deliver(out.result, pCiphertextPart, pulCiphertextPartLen)
        }
    }
}

@c @implementation
public func ks_C_MessageEncryptFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_MessageEncryptFinal", "hSession=\(hSession)") {
        try runtime().messageFinal(session: hSession, encrypt: true)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_MessageDecryptInit(_ hSession: CK_SESSION_HANDLE, _ pMechanism: UnsafeMutablePointer<CK_MECHANISM>?, _ hKey: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_MessageDecryptInit", "hSession=\(hSession) mechanism=\(mechanismName(pMechanism)) hKey=\(hKey)") {
        try messageInit(hSession, pMechanism, hKey, encrypt: false)
    }
}

@c @implementation
public func ks_C_DecryptMessage(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG, _ pCiphertext: UnsafeMutablePointer<CK_BYTE>?, _ ulCiphertextLen: CK_ULONG, _ pPlaintext: UnsafeMutablePointer<CK_BYTE>?, _ pulPlaintextLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_DecryptMessage", "hSession=\(hSession) len=\(ulCiphertextLen)") {
        let rt = try runtime(session: hSession)
        let (params, _) = try messageParameter(rt, hSession, encrypt: false, pParameter, ulParameterLen, readTag: true)
        let r = try rt.decryptMessage(session: hSession, parameters: params,
                                      aad: try input(pAssociatedData, ulAssociatedDataLen),
                                      ciphertext: try input(pCiphertext, ulCiphertextLen),
                                      capacity: try capacity(pPlaintext, pulPlaintextLen))
        return deliver(r, pPlaintext, pulPlaintextLen)
    }
}

@c @implementation
public func ks_C_DecryptMessageBegin(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pAssociatedData: UnsafeMutablePointer<CK_BYTE>?, _ ulAssociatedDataLen: CK_ULONG) -> CK_RV {
    entry("C_DecryptMessageBegin", "hSession=\(hSession)") {
        let rt = try runtime(session: hSession)
        return try inMessage(rt, hSession, encrypt: false) {
            let (params, _) = try messageParameter(rt, hSession, encrypt: false, pParameter, ulParameterLen, readTag: false)
            _ = try rt.messageBegin(session: hSession, encrypt: false, parameters: params,
                                    aad: try input(pAssociatedData, ulAssociatedDataLen))
            return CKR_OK
        }
    }
}

@c @implementation
public func ks_C_DecryptMessageNext(_ hSession: CK_SESSION_HANDLE, _ pParameter: UnsafeMutableRawPointer?, _ ulParameterLen: CK_ULONG, _ pCiphertextPart: UnsafeMutablePointer<CK_BYTE>?, _ ulCiphertextPartLen: CK_ULONG, _ pPlaintextPart: UnsafeMutablePointer<CK_BYTE>?, _ pulPlaintextPartLen: UnsafeMutablePointer<CK_ULONG>?, _ flags: CK_FLAGS) -> CK_RV {
    entry("C_DecryptMessageNext", "hSession=\(hSession) len=\(ulCiphertextPartLen) flags=0x\(String(flags, radix: 16))") {
        let rt = try runtime(session: hSession)
        return try inMessage(rt, hSession, encrypt: false) {
            let last = try lastPart(flags)
            let (params, _) = try messageParameter(rt, hSession, encrypt: false, pParameter, ulParameterLen, readTag: last)
            let r = try rt.decryptMessageNext(session: hSession, parameters: params,
                                              part: try input(pCiphertextPart, ulCiphertextPartLen),
                                              capacity: try capacity(pPlaintextPart, pulPlaintextPartLen), last: last)
            return deliver(r, pPlaintextPart, pulPlaintextPartLen)
        }
    }
}

@c @implementation
public func ks_C_MessageDecryptFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_MessageDecryptFinal", "hSession=\(hSession)") {
        try runtime().messageFinal(session: hSession, encrypt: false)
        return CKR_OK
    }
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
