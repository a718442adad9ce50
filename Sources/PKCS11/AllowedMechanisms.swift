import CPKCS11
import Keychain

/// CKA_ALLOWED_MECHANISMS (PKCS #11 3.0 base §4.7, "Common key
/// attributes"): "a list of mechanisms allowed to be used with this key".
/// The value is a CK_MECHANISM_TYPE array, stored as the caller's bytes
/// (native CK_ULONGs, no pointers, so it crosses the agent protocol as an
/// ordinary byte value). An absent or empty list allows every mechanism the
/// key's type and usage flags allow; a non-empty one is checked at every
/// operation that takes the key with a mechanism: C_EncryptInit,
/// C_DecryptInit, C_SignInit, C_VerifyInit, C_SignRecoverInit,
/// C_VerifyRecoverInit, C_DigestKey (the digest's mechanism), C_WrapKey
/// (the wrapping key), C_UnwrapKey (the unwrapping key), C_DeriveKey (the
/// base key) and C_Message{Encrypt,Decrypt}Init. A mechanism outside the
/// list is CKR_MECHANISM_INVALID, as SoftHSM2 answers
/// (SoftHSM::isMechanismPermitted, consulted by each of those functions).
///
/// The table gives the attribute no footnote: it may be given when a key is
/// made and changed with C_SetAttributeValue while the key is
/// CKA_MODIFIABLE, as SoftHSM2 allows (P11AttrAllowedMechanisms, checks 0).
enum AllowedMechanisms {
    static let elementSize = MemoryLayout<CK_MECHANISM_TYPE>.size

    /// The list, or nil when the value is no CK_MECHANISM_TYPE array.
    static func decode(_ value: [UInt8]) -> [CK_MECHANISM_TYPE]? {
        guard value.count % elementSize == 0 else { return nil }
        return stride(from: 0, to: value.count, by: elementSize).map {
            CK_MECHANISM_TYPE(AttributeCoding.decodeULong(Array(value[$0..<$0 + elementSize]))!)
        }
    }

    /// A template's value must be a whole number of CK_MECHANISM_TYPEs
    /// (CKR_ATTRIBUTE_VALUE_INVALID, as SoftHSM2 answers a length that is not).
    /// Empty is taken, unlike SoftHSM2: it is the default (no restriction),
    /// and a restricted key can be given it back.
    static func checkValue(_ t: AttributeMap) throws {
        if let v = t[CKA_ALLOWED_MECHANISMS], decode(v) == nil { throw PKCS11Error.attributeValueInvalid }
    }

    /// Whether `view` may be used with a mechanism that `matches` accepts.
    static func permits(_ view: ObjectView, _ matches: (CK_MECHANISM_TYPE) -> Bool) -> Bool {
        guard let v = view.attributes[CKA_ALLOWED_MECHANISMS], !v.isEmpty else { return true }
        // A stored value that is no array (not made by this module) allows nothing.
        guard let list = decode(v) else { return false }
        return list.contains(where: matches)
    }

    static func check(_ view: ObjectView, _ type: CK_MECHANISM_TYPE) throws {
        guard permits(view, { $0 == type }) else { throw PKCS11Error.mechanismInvalid }
    }
}

extension Runtime {
    /// A key-taking Init's key, resolved once and checked against its
    /// CKA_ALLOWED_MECHANISMS with the caller's mechanism type (`type`, the
    /// CK_MECHANISM_TYPE the C entry point was given: the decoded
    /// `Mechanism` does not keep it). The order is the spec's: the session
    /// and the mechanism were answered by the caller, a handle that does not
    /// resolve is CKR_KEY_HANDLE_INVALID, then a mechanism outside the list
    /// is CKR_MECHANISM_INVALID, before the key's class, type and usage
    /// checks. `type` nil is a semantics-layer caller (unit tests) that
    /// skips the list. One lookup per Init: the check used to resolve the
    /// key a second time in the C entry point.
    func resolveKey(_ s: Session, _ h: CK_OBJECT_HANDLE, allowing type: CK_MECHANISM_TYPE?) throws -> ObjectView {
        let view = try resolveKey(s, h)
        if let type { try AllowedMechanisms.check(view, type) }
        return view
    }

    /// The check for the key-taking functions that are no Init (C_WrapKey,
    /// C_UnwrapKey, C_DeriveKey: their C entry points check before the
    /// call). A handle that does not resolve is left to the function, which
    /// answers for it in its own order.
    public func checkAllowedMechanism(session s: Session, key: CK_OBJECT_HANDLE, mechanism: CK_MECHANISM_TYPE) throws {
        guard let view = try? resolveKey(s, key) else { return }
        try AllowedMechanisms.check(view, mechanism)
    }

    public func checkAllowedMechanism(session h: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE, mechanism: CK_MECHANISM_TYPE) throws {
        try checkAllowedMechanism(session: try session(h), key: key, mechanism: mechanism)
    }
}
