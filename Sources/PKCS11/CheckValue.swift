import CPKCS11
import Keychain
import KeyshareCrypto

/// CKA_CHECK_VALUE, the key check value (KCV) of secret keys and the
/// checksum of certificates, computed by the module on every path that makes
/// one (C_CreateObject, C_GenerateKey, C_UnwrapKey, C_DeriveKey,
/// C_CopyObject: `Runtime.store`), and for objects stored before it was
/// computed, when read (`ObjectRules.lookup`).
///
/// PKCS #11 3.0 base specification, §4.10 (common secret key attributes):
/// "If a value is supplied in the application template (allowed but never
/// necessary) then, if supported, it MUST match what the library calculates
/// it to be or the library returns a CKR_ATTRIBUTE_VALUE_INVALID." — "The
/// generation of the KCV may be prevented by the application supplying the
/// attribute in the template as a no-value (0 length) entry." —
/// "C_SetAttributeValue may be used to destroy the attribute, by supplying
/// no-value." — "Unless otherwise specified for the object definition, the
/// value of this attribute is derived from the key object by taking the
/// first three bytes of an encryption of a single block of null (0x00)
/// bytes, using the default cipher and mode (e.g. ECB) associated with the
/// key type of the secret key object."
///
/// The object definitions (PKCS #11 3.0 current mechanisms):
/// - AES, DES, DES3: "the first three bytes of the ECB encryption of a
///   single block of null (0x00) bytes, using the default cipher associated
///   with the key type of the secret key object";
/// - generic secret: "the first three bytes of the SHA-1 hash of the generic
///   secret key object's CKA_VALUE attribute"; ChaCha20: the same of "the
///   ChaCha20 secret key object's CKA_VALUE"; the HMAC key types
///   (CKK_SHA*_HMAC) and CKK_HKDF have no definition of their own and are
///   generic secrets of a named hash: SHA-1 too, as SoftHSM2 computes it
///   for its generic and HMAC keys;
/// - X.509 certificates (§4.6.3): "the first three bytes of the SHA-1 hash
///   of the certificate object's CKA_VALUE attribute".
///
/// An empty stored value is the caller's "do not store": it is reported as
/// empty (length 0), as SoftHSM2 reports it, and never recomputed.
enum CheckValue {
    static let length = 3

    /// The check value of an object of `objectClass` / `keyType` whose
    /// CKA_VALUE is `value`, or nil for an object that has none.
    static func compute(objectClass: CK_OBJECT_CLASS, keyType: CK_KEY_TYPE?, value: [UInt8]) -> [UInt8]? {
        switch objectClass {
        case CKO_CERTIFICATE:
            return value.isEmpty ? nil : DigestAlgorithm.sha1Prefix(value, count: length)
        case CKO_SECRET_KEY:
            guard let keyType, !value.isEmpty else { return nil }
            switch keyType {
            case CKK_AES:
                return try? zeroBlock(AESMode.ecb.context(key: value, iv: nil, encrypt: true), blockSize: 16)
            case CKK_DES, CKK_DES3:
                let variant: DES.Variant = keyType == CKK_DES ? .des : .tripleDES
                return try? zeroBlock(DES.context(variant, .ecb, key: value, iv: nil, encrypt: true, padding: false),
                                      blockSize: DES.blockSize)
            case CKK_GENERIC_SECRET, CKK_CHACHA20, CKK_HKDF:
                return DigestAlgorithm.sha1Prefix(value, count: length)
            case let k where Runtime.hmacKeyType.values.contains(k):
                return DigestAlgorithm.sha1Prefix(value, count: length)
            default:
                return nil
            }
        default:
            return nil
        }
    }

    private static func zeroBlock(_ c: CipherContext, blockSize: Int) throws -> [UInt8] {
        Array(try c.update([UInt8](repeating: 0, count: blockSize)).prefix(length))
    }

    /// The check value of a complete attribute set, or nil.
    static func compute(_ a: AttributeMap) -> [UInt8]? {
        guard let cls = a.ulong(CKA_CLASS), let value = a[CKA_VALUE] else { return nil }
        return compute(objectClass: cls, keyType: a.ulong(CKA_KEY_TYPE), value: value)
    }

    /// A new object's CKA_CHECK_VALUE: the computed one when the template
    /// said nothing, none (empty) when it gave an empty value, and
    /// CKR_ATTRIBUTE_VALUE_INVALID for a value that is not the computed one.
    /// Objects without a check value (data, public and private keys) keep
    /// the rule of their attribute table (AttributeSchema).
    static func settle(_ a: inout AttributeMap) throws {
        guard let expected = compute(a) else { return }
        switch a[CKA_CHECK_VALUE] {
        case nil: a[CKA_CHECK_VALUE] = expected
        case let given? where given.isEmpty || given == expected: break
        default: throw PKCS11Error.attributeValueInvalid
        }
    }

    /// One C_SetAttributeValue (or C_CopyObject template) entry: an empty
    /// value destroys the attribute, the computed value is accepted (it
    /// changes nothing, or restores it), anything else is
    /// CKR_ATTRIBUTE_VALUE_INVALID.
    static func checkSet(_ view: ObjectView, _ given: [UInt8]) throws {
        if given.isEmpty { return }
        guard let value = view.attributes[CKA_VALUE],
              let expected = compute(objectClass: view.objectClass, keyType: view.keyType, value: value),
              given == expected else { throw PKCS11Error.attributeValueInvalid }
    }
}
