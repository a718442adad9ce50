import CPKCS11

/// Key generation, wrapping and derivation: the key-management chapter adds
/// its mechanisms here (Tokens' key generation writes the same templates).
extension Runtime {
    public func generateKeyPair(session h: CK_SESSION_HANDLE, mechanism: Mechanism,
                                publicTemplate: Template, privateTemplate: Template) throws -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        _ = try session(h)
        _ = try publicTemplate.map()
        _ = try privateTemplate.map()
        throw PKCS11Error.mechanismInvalid
    }

    public func generateKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, template: Template) throws -> CK_OBJECT_HANDLE {
        _ = try session(h)
        _ = try template.map()
        throw PKCS11Error.mechanismInvalid
    }
}
