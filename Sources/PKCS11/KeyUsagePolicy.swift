import CPKCS11
import Keychain

/// The usage rules of secret keys that go beyond "the flag must be set":
/// the defaults a key gets when its template names no usage, and the
/// constraints that stop the known key-extraction attacks on C_WrapKey /
/// C_UnwrapKey (docs/pkcs11-conformance.md, "Wrap/decrypt separation").
///
/// The attacks (Clulow, "On the security of PKCS #11", CHES 2003;
/// Bortolozzo, Centenaro, Focardi, Steel, "Attacking and fixing PKCS #11
/// security tokens" (Tookan), CCS 2010; Fröschle and Steel, "Analysing
/// PKCS #11 key management APIs with unbounded fresh data", 2009), and the
/// rule here that stops each:
///
/// - wrap/decrypt: K has WRAP and DECRYPT; C_WrapKey(K, S), then
///   C_Decrypt(K, blob) gives S. Rule 1 (`checkWrap`): a sensitive key is
///   never wrapped under a key that can decrypt.
/// - known wrapping key: the caller creates K with a value it knows (or
///   unwraps / derives one) and wraps S under it. Rule 2 (`checkWrap`): a
///   sensitive key is wrapped only under a key whose value never was outside
///   the token (generated here and always sensitive), or one the SO marked
///   CKA_TRUSTED.
/// - encrypt/unwrap: K has ENCRYPT and UNWRAP; the caller encrypts a value
///   of its choice into a wrapped-key blob (AES-CBC on single blocks is AES
///   itself, so any wrap format can be built) and unwraps it, planting a key
///   whose value it knows, then wraps S under that key. Rule 2 stops the
///   extraction: the planted key is not local, so it wraps no sensitive key.
///   The unwrap itself is allowed: refusing unwrapping keys that can encrypt
///   (the Tookan configuration) would break OpenSC's own flow, where
///   `pkcs11-tool --keygen --usage-wrap` makes a key with ENCRYPT, DECRYPT,
///   WRAP and UNWRAP (the defaults below) and `--unwrap` uses it, and it
///   would add nothing here: a planted key is no more than a key the caller
///   could create with C_CreateObject.
/// - flag changes and copies: K wraps S while it cannot decrypt, then
///   C_SetAttributeValue (or C_CopyObject) gives K, or a copy with K's
///   value, CKA_DECRYPT. Rule 3 (`checkChange`): on a secret key
///   CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP and CKA_UNWRAP are fixed at creation.
/// - re-import: C_WrapKey(K, S), then C_UnwrapKey(K, blob) with
///   CKA_SENSITIVE=false and CKA_EXTRACTABLE=true reads S's value. Rule 4
///   (`checkUnwrapTemplate`): a key unwrapped under a key that can wrap and
///   can neither decrypt nor derive (so the blob may be one of this token's
///   own exports of a sensitive key) is never readable (not both
///   non-sensitive and extractable). A re-imported copy with other
///   flags cannot wrap sensitive keys (rule 2: it is not local).
/// - re-imported wrapping key: an extractable wrapping key W is wrapped,
///   then unwrapped as W' with CKA_DECRYPT; S is wrapped under W (allowed:
///   W cannot decrypt) and decrypted with W'. Rule 5 (`checkWrap`): a
///   sensitive key that can wrap is wrapped only under a CKA_TRUSTED key.
/// - derive from the wrapping key: a generated wrap-only key D with
///   CKA_DERIVE wraps S; CKM_XOR_BASE_AND_DATA with zero data (or
///   CKM_EXTRACT_KEY_FROM_KEY from bit 0) makes a key of D's value with
///   CKA_DECRYPT, which opens the blob (found by the third-party re-run of
///   2026-11-24; the derivation rules force sensitivity, not usage). Rule 1
///   counts CKA_DERIVE as CKA_DECRYPT: a sensitive key is never wrapped
///   under a key that can derive; rule 3 fixes CKA_DERIVE too, so it cannot
///   be switched on after the wrap, on the key or on a copy.
///
/// What the rules leave alone: encrypt/decrypt with a key that also wraps
/// (the old rule refused C_DecryptInit for any CKA_WRAP key, which broke the
/// common templates that set both), wrapping non-sensitive keys (their value
/// is readable anyway), and everything about keys without WRAP/UNWRAP.
enum KeyUsagePolicy {
    /// The usage flags a new secret key (C_CreateObject, C_GenerateKey,
    /// C_UnwrapKey, C_DeriveKey) gets when its template does not name them.
    /// PKCS #11 3.0 leaves these defaults to the token. SoftHSM2 sets
    /// ENCRYPT, DECRYPT, SIGN, VERIFY, WRAP and UNWRAP true and DERIVE false
    /// (src/lib/P11Attributes.cpp, P11Attr*::setDefault); Kryoptic sets all
    /// false (src/object/key.rs, add_common_secret_key_attrs). SoftHSM2's
    /// choice is taken: a template written against SoftHSM2 relies on it,
    /// and one written against Kryoptic names every flag it needs, so both
    /// work. Keys stored before this rule keep what they had (the class
    /// default of false in ObjectRules).
    static let secretKeyDefaults: [(CK_ATTRIBUTE_TYPE, Bool)] = [
        (CKA_ENCRYPT, true), (CKA_DECRYPT, true), (CKA_SIGN, true), (CKA_VERIFY, true),
        (CKA_WRAP, true), (CKA_UNWRAP, true), (CKA_DERIVE, false),
    ]

    /// `secretKeyDefaults` as a map with room for a whole secret key (the defaults, the 12 that
    /// `Runtime.secretKeyAttributes` sets, a few of the caller's, CKA_CHECK_VALUE): a new key's map
    /// starts as a copy of it, which copies the storage once instead of growing it and hashing
    /// each default again.
    static let secretKeyBase: AttributeMap = {
        var a = AttributeMap(minimumCapacity: 24)
        applySecretKeyDefaults(&a)
        return a
    }()

    static func applySecretKeyDefaults(_ a: inout AttributeMap) {
        for (type, value) in secretKeyDefaults where a[type] == nil { a[type] = AttributeCoding.bool(value) }
    }

    /// Rule 3: the secret-key flags the wrap rules read cannot change after
    /// creation (setting the value a key already has is accepted). PKCS #11
    /// 3.0 §4.10 marks them modifiable, but lets a token refuse a change
    /// with CKR_ATTRIBUTE_READ_ONLY, which is what this does. CKA_DERIVE is
    /// one of them: a derivation can give a key of the base key's value with
    /// other flags (the "derive from the wrapping key" attack above).
    static let fixedSecretKeyUsage: Set<CK_ATTRIBUTE_TYPE> = [CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP, CKA_DERIVE]

    static func checkChange(_ view: ObjectView, _ a: Attribute) throws {
        guard view.objectClass == CKO_SECRET_KEY, fixedSecretKeyUsage.contains(a.type) else { return }
        guard let new = AttributeCoding.decodeBool(a.value) else { throw PKCS11Error.attributeValueInvalid }
        if new != (view.bool(a.type) ?? false) { throw PKCS11Error.attributeReadOnly }
    }

    /// Whether a key's value has never been outside the token: generated
    /// here (CKA_LOCAL) and sensitive ever since (CKA_ALWAYS_SENSITIVE).
    /// Created, unwrapped and derived keys are not: their value was, or is,
    /// known to someone (a derived key's to the peer).
    static func valueNeverLeft(_ view: ObjectView) -> Bool {
        view.bool(CKA_LOCAL) == true && view.bool(CKA_ALWAYS_SENSITIVE) == true
    }

    /// Rules 1, 2 and 5, and CKA_WRAP_WITH_TRUSTED, for C_WrapKey of `target`
    /// under `wrapper` (whose CKA_WRAP is already checked). The answer is
    /// CKR_KEY_NOT_WRAPPABLE: "the token can only wrap a given key with
    /// certain types of keys, and the wrapping key specified is not one of
    /// these types" (PKCS #11 3.0 §5.1.6).
    static func checkWrap(wrapper: ObjectView, target: ObjectView) throws {
        if target.bool(CKA_WRAP_WITH_TRUSTED) == true, wrapper.bool(CKA_TRUSTED) != true {
            throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
        }
        // A non-sensitive key's value is readable as it is: wrapping it reveals nothing.
        guard target.bool(CKA_SENSITIVE) ?? true else { return }
        // Rule 8 (issue 29): a private key is never wrapped under a public secret key (a session key
        // born CKA_PRIVATE=false), which outlives C_Logout: unwrapped again under it after the
        // logout, the private key would be usable without the login.
        // (A public key object is public by nature: rule 2 already asks CKA_TRUSTED of it.)
        if target.isPrivate, wrapper.objectClass == CKO_SECRET_KEY, !wrapper.isPrivate {
            throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
        }
        // Rule 1: a key that can decrypt opens the blob; one that can derive
        // makes a key of its own value that can (XOR with zeros, extraction).
        if wrapper.bool(CKA_DECRYPT) == true || wrapper.bool(CKA_DERIVE) == true {
            throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
        }
        let trusted = wrapper.bool(CKA_TRUSTED) == true
        if !valueNeverLeft(wrapper), !trusted { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
        if target.bool(CKA_WRAP) == true, !trusted { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
    }

    /// How a wrap mechanism protects what it wraps, for rules 6 and 7.
    enum WrapProtection {
        /// CKM_AES_KEY_WRAP(_PAD): deterministic and authenticated; no IV to misuse, no oracle.
        case keyWrap
        /// CKM_AES_ECB, CKM_AES_CBC(_PAD), CKM_DES3_ECB, CKM_DES3_CBC(_PAD): unauthenticated; C_UnwrapKey
        /// under the same key is a padding oracle (CBC_PAD) or cuts the blob into shorter keys (ECB, CBC).
        case blockMode
        /// CKM_AES_GCM: a counter mode under an IV the caller chooses.
        case gcm
    }

    /// Rules 6, 7 and 9, for the wrap mechanisms whose safety depends on more
    /// than the wrapping key's flags (CKR_KEY_NOT_WRAPPABLE):
    ///
    /// - Rule 6, CBC padding oracle (Bardou, Focardi, Kawamoto, Simionato,
    ///   Steel, Tsay, "Efficient padding oracle attacks on cryptographic
    ///   hardware", CRYPTO 2012): C_WrapKey(W, CKM_AES_CBC_PAD, S), then
    ///   C_UnwrapKey(W, CKM_AES_CBC_PAD, blob') for modified blobs tells
    ///   whether each one's padding is valid, which decrypts the blob a
    ///   byte at a time without CKA_DECRYPT. The unpadded block modes (ECB,
    ///   and CBC, whose every ciphertext block is the next block's IV) have
    ///   a splitting attack instead: one block of the blob, unwrapped as a
    ///   DES key (or the blob's first blocks as a shorter key), gives a key
    ///   of part of S's value that the caller can use, so each part is found
    ///   by exhaustive search on its own (3 × 2^56 for a three-key 3DES key;
    ///   Clulow, CHES 2003, §3). A sensitive key is wrapped with any of these
    ///   modes only under a key that cannot unwrap.
    /// - Rule 7, GCM IV reuse: C_WrapKey(W, CKM_AES_GCM with IV X) of a key
    ///   whose value the caller knows (one it created, sensitive or not),
    ///   then of S with the same X: the two blobs are the two values XORed
    ///   with one keystream, so S = blob1 ^ blob2 ^ known. C_Encrypt with W
    ///   (GCM or CTR under a chosen IV) gives the keystream directly. The
    ///   module cannot see whether an IV was used before (PKCS #11 3.0 has
    ///   no module-generated IV for C_WrapKey), so a sensitive key is never
    ///   wrapped with GCM; CKM_AES_KEY_WRAP(_PAD) wraps it. GCM still
    ///   unwraps, and wraps non-sensitive keys.
    /// - Rule 9, weaker wrapping key (Clulow, CHES 2003, §2.2): a key
    ///   wrapped under a weaker one is as strong as the weaker one. AES
    ///   wrapping keys are 128 bits at least; a Triple DES key (CKK_DES3,
    ///   112 bits of strength; CKK_DES2, 80: SP 800-57 Part 1 Rev. 5 Table 2)
    ///   wraps a sensitive key only when that key is a DES key no stronger
    ///   than itself (DES, DES2 and, under DES3, DES3), never an AES,
    ///   generic, ChaCha20 or private key.
    static func checkWrapMechanism(_ protection: WrapProtection, wrapper: ObjectView, target: ObjectView) throws {
        guard target.bool(CKA_SENSITIVE) ?? true else { return }
        switch protection {
        case .keyWrap: break
        case .blockMode: if wrapper.bool(CKA_UNWRAP) == true { throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE) }
        case .gcm: throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
        }
        let weakerThan: [CK_KEY_TYPE: Set<CK_KEY_TYPE>] = [CKK_DES3: [CKK_DES, CKK_DES2, CKK_DES3], CKK_DES2: [CKK_DES, CKK_DES2]]
        if let type = wrapper.keyType, let allowed = weakerThan[type] {
            guard target.objectClass == CKO_SECRET_KEY, let t = target.keyType, allowed.contains(t) else {
                throw PKCS11Error(CKR_KEY_NOT_WRAPPABLE)
            }
        }
    }

    /// Rule 4, for C_UnwrapKey's template: under a key that may have wrapped
    /// a sensitive key (`mayHoldSensitiveBlobs`), the new key's value is not
    /// readable, i.e. not both CKA_SENSITIVE false and CKA_EXTRACTABLE true
    /// (CKR_TEMPLATE_INCONSISTENT; the defaults, sensitive and unextractable,
    /// pass). A non-sensitive but unextractable key is still allowed
    /// (pkcs11-tool --unwrap asks for one), and CKA_EXTRACTABLE can never be
    /// turned on later.
    static func checkUnwrapTemplate(unwrapper: ObjectView, _ t: AttributeMap) throws {
        guard mayHoldSensitiveBlobs(unwrapper) else { return }
        if try t.checkedBool(CKA_SENSITIVE) == false, try t.checkedBool(CKA_EXTRACTABLE) == true {
            throw PKCS11Error.templateInconsistent
        }
    }

    /// Whether a blob of a sensitive key can exist under this secret key's
    /// value: the key can wrap, and neither decrypt nor derive. Rule 1 keeps
    /// a key that can do either from wrapping a sensitive key, rule 3 keeps
    /// its flags (on copies too), and another key of the same value with
    /// other flags comes only through an SO-trusted key (derivation needs
    /// CKA_DERIVE, which bars wrapping; re-importing a sensitive wrapping
    /// key needs a CKA_TRUSTED wrapper, rule 5; an imported, unwrapped or
    /// derived key is not local, rule 2). So unwrapping a readable key under
    /// such a key (python-pkcs11's and SoftHSM2's ordinary AES key with
    /// ENCRYPT, DECRYPT, WRAP and UNWRAP) gives out no key that was ever
    /// sensitive here; until 2026-11-24 rule 4 refused it for every key with
    /// CKA_WRAP.
    static func mayHoldSensitiveBlobs(_ k: ObjectView) -> Bool {
        k.bool(CKA_WRAP) == true && k.bool(CKA_DECRYPT) != true && k.bool(CKA_DERIVE) != true
    }
}
