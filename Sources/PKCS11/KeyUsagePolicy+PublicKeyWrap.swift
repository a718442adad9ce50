import CPKCS11
import Keychain
import KeyshareCrypto

/// The wrap/decrypt separation rules (KeyUsagePolicy.swift) for wrapping
/// under an RSA public key and unwrapping with its private key
/// (CKM_RSA_PKCS, CKM_RSA_PKCS_OAEP, CKM_RSA_AES_KEY_WRAP; RSAWrap.swift).
///
/// A public key is public: anyone can create one whose private half they
/// hold, so the value of a key wrapped under it is known to that holder.
/// The rules map over as:
///
/// - Rule 2 (known wrapping key): a public key's private half is never
///   known to be inside the token only, so `checkWrap` already lets a
///   sensitive key be wrapped only under a CKA_TRUSTED public key (the SO's
///   statement that the holder of the private half may receive the token's
///   keys), and rule 5 (a sensitive key that can wrap) and
///   CKA_WRAP_WITH_TRUSTED apply as they are.
/// - Rule 1 (wrap/decrypt): the decrypting half is the private key. When it
///   is in this token, the token's own user is that holder: C_Decrypt with
///   CKM_RSA_X_509 or the wrap mechanism opens the blob, and a private key's
///   CKA_DECRYPT can be switched on at any time (PKCS #11 lets it change). So
///   a sensitive key is never wrapped under a public key whose private half
///   (same modulus) is in this token, whatever that key's flags say now.
///   Trusted public keys are for sending keys to another holder (a backup
///   token, an escrow key), which is what they are for.
/// - Rule 4 (re-import): C_UnwrapKey with a private key can open any blob
///   made for its public half, possibly one this token exported, so a key
///   unwrapped with a private key is never readable (not both
///   CKA_SENSITIVE false and CKA_EXTRACTABLE true), unless the private key
///   can open the blob with C_Decrypt anyway (`decryptOpens`): then the
///   refusal hides nothing (python-pkcs11's test_rsa test_key_wrap, an
///   ordinary pair with DECRYPT and UNWRAP, failed on it).
extension KeyUsagePolicy {
    /// Rules 1, 2, 5 and CKA_WRAP_WITH_TRUSTED for `target` under the public
    /// key `wrapper`, whose private half is or is not (`privateHalfHere`) in
    /// the token. CKR_KEY_NOT_WRAPPABLE when they refuse.
    static func checkPublicKeyWrap(wrapper: ObjectView, target: ObjectView, privateHalfHere: () throws -> Bool) throws {
        try checkWrap(wrapper: wrapper, target: target)
        guard target.bool(CKA_SENSITIVE) ?? true else { return }
        if try privateHalfHere() { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
    }

    /// Whether C_Decrypt with `unwrapper` opens what C_UnwrapKey with it and
    /// `mechanism` opens: the key has CKA_DECRYPT and its
    /// CKA_ALLOWED_MECHANISMS is empty or names the mechanism's RSA padding
    /// (CKM_RSA_PKCS_OAEP for CKM_RSA_AES_KEY_WRAP, whose AES key is OAEP
    /// encrypted) or CKM_RSA_X_509, which opens every padding. A key without
    /// them (CKA_DECRYPT false, or a list without those) keeps rule 4, so an
    /// unwrap-only escrow key made unmodifiable still hands out only
    /// unreadable keys.
    static func decryptOpens(_ unwrapper: ObjectView, _ mechanism: Mechanism) -> Bool {
        let padding: CK_MECHANISM_TYPE
        switch mechanism {
        case .rsaPKCS: padding = CKM_RSA_PKCS
        case .rsaOAEP, .rsaAESKeyWrap: padding = CKM_RSA_PKCS_OAEP
        default: return false
        }
        return unwrapper.bool(CKA_DECRYPT) == true
            && AllowedMechanisms.permits(unwrapper, { $0 == padding || $0 == CKM_RSA_X_509 })
    }

    /// Rule 4 for an unwrapping private key (C_DecapsulateKey keeps it whole).
    static func checkPrivateKeyUnwrapTemplate(_ t: AttributeMap) throws {
        if try t.checkedBool(CKA_SENSITIVE) == false, try t.checkedBool(CKA_EXTRACTABLE) == true {
            throw PKCS11Error.templateInconsistent
        }
    }
}

extension Runtime {
    /// Whether a private key with this RSA modulus is an object of the
    /// session's token (token or session object, of any usage). Without the
    /// user's key the private objects cannot be read, so the answer is yes
    /// (the rule fails closed).
    func rsaPrivateHalfPresent(_ s: Session, modulus: [UInt8]) throws -> Bool {
        let n = Array(modulus.drop { $0 == 0 })
        func same(_ a: AttributeMap) -> Bool { a[CKA_MODULUS].map { Array($0.drop { $0 == 0 }) == n } ?? false }
        guard let key = userKey(for: s.tokenID) else { return true }
        let items = try store.find(ItemQuery(tokenID: s.tokenID, itemClass: .privateKey), key: key)
        if items.contains(where: { same($0.attributes) }) { return true }
        let sessionObjects = lock.withLock { () -> [AttributeMap] in
            objects.sessionHandles.compactMap { h in
                guard case .session(let o)? = objects.entries[h], o.tokenID == s.tokenID,
                      o.objectClass == CKO_PRIVATE_KEY else { return nil }
                return o.attributes
            }
        }
        return sessionObjects.contains(where: same)
    }
}
