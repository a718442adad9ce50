import CPKCS11

// PKCS #11 3.2 C_WrapKeyAuthenticated / C_UnwrapKeyAuthenticated: key wrapping with an AEAD
// mechanism whose associated data is an argument of the call (it binds the wrapped key to a
// context: a key identifier, a policy, a version). The module offers them with CKM_AES_GCM,
// its one AEAD wrap mechanism (CK_GCM_PARAMS gives the IV and the tag length).
//
// The associated data is the call's: a CK_GCM_PARAMS that carries its own pAAD as well is
// CKR_MECHANISM_PARAM_INVALID, as two sources of associated data would leave a host unsure
// which one the tag covers. Everything else is C_WrapKey's and C_UnwrapKey's own path
// (Wrap.swift): CKA_EXTRACTABLE, CKA_WRAP_WITH_TRUSTED, the wrap/decrypt separation of
// KeyUsagePolicy (a sensitive key is never wrapped with GCM, never under a key that can
// decrypt), and the unwrap template rules. These calls cannot get a key out that C_WrapKey
// would refuse. Any other mechanism is CKR_MECHANISM_INVALID (key wrap and CBC_PAD
// authenticate no associated data; RSA wrapping has none).

extension Runtime {
    /// The GCM parameters, without associated data of their own.
    private func authenticatedGCM(_ mechanism: Mechanism) throws -> GCMParameters {
        guard case .aesGCM(let p) = mechanism else { throw PKCS11Error.mechanismInvalid }
        guard p.aad.isEmpty else { throw PKCS11Error.mechanismParamInvalid }
        return p
    }

    /// `associatedData` nil: a NULL pointer with a non-zero length, CKR_ARGUMENTS_BAD after the
    /// errors of the arguments before it (the wrapping key, the key), as the parameters are ordered.
    public func wrapKeyAuthenticated(session h: CK_SESSION_HANDLE, mechanism: Mechanism, wrappingKey: CK_OBJECT_HANDLE,
                                     key: CK_OBJECT_HANDLE, associatedData: [UInt8]?,
                                     capacity: Int?) throws -> OutputResult {
        let s = try session(h)
        var p = try authenticatedGCM(mechanism)
        guard let associatedData else {
            _ = try kek(s, wrappingKey, usage: CKA_WRAP)
            _ = try resolveKey(s, key)
            throw PKCS11Error.argumentsBad
        }
        p.aad = associatedData
        return try wrapKey(s, method: .gcm(p), wrappingKey: wrappingKey, key: key, capacity: capacity)
    }

    public func unwrapKeyAuthenticated(session h: CK_SESSION_HANDLE, mechanism: Mechanism,
                                       unwrappingKey: CK_OBJECT_HANDLE, wrapped: [UInt8], template: Template,
                                       associatedData: [UInt8]?) throws -> CK_OBJECT_HANDLE {
        let s = try session(h)
        var p = try authenticatedGCM(mechanism)
        guard let associatedData else {
            _ = try kek(s, unwrappingKey, usage: CKA_UNWRAP)
            throw PKCS11Error.argumentsBad
        }
        p.aad = associatedData
        try checkInheritedPrivacy(s, sources: [unwrappingKey], templates: [template], stored: KS_CKA_UNWRAP_TEMPLATE)
        return try unwrapKey(s, method: .gcm(p), unwrappingKey: unwrappingKey, wrapped: wrapped, template: template)
    }

    /// C_GetSessionValidationFlags (3.2): the validations the session's last operation
    /// satisfied. The module has no validated configuration (no FIPS 140-3 or Common Criteria
    /// certificate, no CKO_VALIDATION objects), so no operation ever satisfies one: the answer
    /// is 0 for a live session, as Kryoptic answers when built without its FIPS feature.
    /// Kryoptic answers 0 for a type it does not know, too; so does this.
    public func sessionValidationFlags(session h: CK_SESSION_HANDLE, type: CK_ULONG) throws -> CK_FLAGS {
        _ = try session(h)
        _ = type
        return 0
    }
}
