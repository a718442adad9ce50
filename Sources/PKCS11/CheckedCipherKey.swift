import CPKCS11

// The per-message Init fast path (issue 13): an application that calls
// C_EncryptInit / C_DecryptInit for every message with the same key and
// mechanism type pays, after the first, neither the key's resolution nor
// its checks again, only what can change: the runtime's object/login
// generation and, for a token object, the store's change counter
// (ResolvedKeyMemo.swift says what moves them and when everything is
// dropped). The mechanism's parameters (IV, counter block, tag length)
// are new each time and go through the operation's constructor exactly as
// on the full path.
//
// What is reused is the key value that `cipherOperation` took from the
// memoized view after every check passed for this mechanism *type* and
// direction: CKA_ALLOWED_MECHANISMS (checked with that type), the usage
// flag (CKA_ENCRYPT or CKA_DECRYPT: the direction), and the family's
// class, key type and size (a mechanism type always decodes to the same
// family: AES, DES or 3DES, ChaCha20). None of these can change while the
// generation and counter stand still, so the full path would pass them
// again and take the same value. RSA takes no key value and always goes
// the full way.

extension Runtime {
    /// C_EncryptInit's / C_DecryptInit's operation for `key`: through the
    /// session's checked key when the last Init checked this very key for
    /// `type` and this direction under the current generation, else the
    /// full resolution and checks (which then record it). `type` nil (a
    /// Swift caller that skips CKA_ALLOWED_MECHANISMS): always the full way.
    func cipherInitOperation(_ s: Session, _ mechanism: Mechanism, key h: CK_OBJECT_HANDLE, allowing type: CK_MECHANISM_TYPE?,
                             encrypting: Bool) throws -> any CipherOperation {
        guard let type else {
            return try cipherOperation(mechanism, try resolveKey(s, h, allowing: nil), encrypting: encrypting)
        }
        let generation = lock.withLock { objectGeneration }
        if let k = try s.keyMemo.cipherKey(h, generation: generation, counter: { try store.changeCounter() }, type: type,
                                           encrypting: encrypting) {
            return try symmetricCipherOperation(mechanism, key: k, encrypting: encrypting)
        }
        let view = try resolveKey(s, h, allowing: type)
        return try cipherOperation(mechanism, view, encrypting: encrypting) { key in
            s.keyMemo.setCipherKey(h, generation: generation, type: type, encrypting: encrypting, key: key)
        }
    }
}
