import CPKCS11
import Keychain
import KeyshareCrypto

// PKCS #11 3.2 §5.18 C_EncapsulateKey / C_DecapsulateKey with CKM_ML_KEM (issue 18). The shared
// secret (32 bytes) becomes a secret key made from the caller's template, as Kryoptic makes it
// (its ML-KEM "import_from_wrapped"): CKO_SECRET_KEY, CKK_GENERIC_SECRET when the template names
// no type, or CKK_AES; CKA_VALUE_LEN, when given, takes the secret's first bytes (AES: 16, 24 or
// 32; generic: 1-32), else all 32. A ciphertext of the wrong length is CKR_WRAPPED_KEY_LEN_RANGE;
// a well-formed but wrong one decapsulates to FIPS 203's implicit-rejection secret (a different
// key, not an error), which is what ML-KEM specifies.

extension Runtime {
    /// The secret key a KEM template asks for (ML-KEM, RSA, RSASVE; ECDH takes C_DeriveKey's
    /// rules): CKO_SECRET_KEY, CKK_GENERIC_SECRET when it names no type, or CKK_AES; no CKA_VALUE
    /// (CKR_ATTRIBUTE_READ_ONLY); CKA_VALUE_LEN at least 1 (AES: 16, 24 or 32), else
    /// CKR_ATTRIBUTE_VALUE_INVALID; without it `defaultLength`, or for an AES key with
    /// `aesNeedsLength` CKR_TEMPLATE_INCOMPLETE; a length over `maxLength` is `tooLong`.
    func kemSecretRequest(_ t: AttributeMap, defaultLength: Int, maxLength: Int, tooLong: PKCS11Error,
                          aesNeedsLength: Bool = false) throws -> (CK_KEY_TYPE, Int) {
        let cls = try t.checkedULong(CKA_CLASS) ?? CKO_SECRET_KEY
        guard cls == CKO_SECRET_KEY else { throw PKCS11Error.templateInconsistent }
        let keyType = try t.checkedULong(CKA_KEY_TYPE) ?? CKK_GENERIC_SECRET
        guard keyType == CKK_GENERIC_SECRET || keyType == CKK_AES else { throw PKCS11Error.templateInconsistent }
        if t[CKA_VALUE] != nil { throw PKCS11Error.attributeReadOnly }
        let length: Int
        if let n = try t.checkedULong(CKA_VALUE_LEN) {
            guard let i = Int(exactly: n), i >= 1, keyType != CKK_AES || [16, 24, 32].contains(i) else {
                throw PKCS11Error.attributeValueInvalid
            }
            length = i
        } else {
            if aesNeedsLength, keyType == CKK_AES { throw PKCS11Error(CKR_TEMPLATE_INCOMPLETE) }
            length = defaultLength
        }
        guard length <= maxLength else { throw tooLong }
        return (keyType, length)
    }

    /// The key of a C_EncapsulateKey / C_DecapsulateKey, whatever the mechanism: of class `cls` and
    /// one of `keyTypes`, held by this module (another module's key: CKR_KEY_TYPE_INCONSISTENT),
    /// with `usage` (CKA_ENCAPSULATE / CKA_DECAPSULATE) true and `mechanism` allowed by its
    /// CKA_ALLOWED_MECHANISMS.
    func encapsulationKey(_ s: Session, _ h: CK_OBJECT_HANDLE, cls: CK_OBJECT_CLASS, keyTypes: [CK_KEY_TYPE],
                          usage: CK_ATTRIBUTE_TYPE, mechanism: CK_MECHANISM_TYPE) throws -> ObjectView {
        let view = try resolveKey(s, h)
        guard view.objectClass == cls, let type = view.keyType, keyTypes.contains(type), !view.isExternalKey else {
            throw PKCS11Error.keyTypeInconsistent
        }
        guard view.bool(usage) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        try AllowedMechanisms.check(view, mechanism)
        if cls == CKO_PRIVATE_KEY { try checkConsent(view, .decapsulate) }  // Prompt.swift
        return view
    }

    /// ML-KEM's key: the mechanism is checked before the key is looked at.
    private func kemKey(_ s: Session, _ h: CK_OBJECT_HANDLE, mechanism: Mechanism, cls: CK_OBJECT_CLASS,
                        usage: CK_ATTRIBUTE_TYPE) throws -> ObjectView {
        guard case .undecoded(CKM_ML_KEM, _) = mechanism else { throw PKCS11Error.mechanismInvalid }
        return try encapsulationKey(s, h, cls: cls, keyTypes: [CKK_ML_KEM], usage: usage, mechanism: CKM_ML_KEM)
    }

    /// ML-KEM's secret: all 32 bytes, or the first CKA_VALUE_LEN of them.
    private func kemKeyRequest(_ t: AttributeMap) throws -> (CK_KEY_TYPE, Int, AttributeMap) {
        let n = MLKEMParameterSet.sharedSecretLength
        let (keyType, length) = try kemSecretRequest(t, defaultLength: n, maxLength: n, tooLong: .attributeValueInvalid)
        var rest = t
        rest[CKA_VALUE_LEN] = nil
        return (keyType, length, rest)
    }

    /// C_EncapsulateKey: nil handle for a length query or a short buffer (no key is made then).
    public func encapsulateKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, publicKey: CK_OBJECT_HANDLE,
                               template: Template, capacity: Int?) throws -> (OutputResult, CK_OBJECT_HANDLE?) {
        let s = try session(h)
        if mechanism.isRSAKEM {  // RSAEncapsulation.swift
            return try rsaEncapsulateKey(s, mechanism: mechanism, publicKey: publicKey, template: template, capacity: capacity)
        }
        if let p = mechanism.ecdhKEM {  // ECDHEncapsulation.swift
            return try ecdhEncapsulateKey(s, p, publicKey: publicKey, template: template, capacity: capacity)
        }
        let room = MLKEMParameterSet.maxCiphertextLength
        var out = [UInt8](repeating: 0, count: room)
        let (r, key) = try out.withUnsafeMutableBytes {
            try mlKEMEncapsulateKey(s, mechanism: mechanism, publicKey: publicKey, template: template,
                                    output: $0.baseAddress, capacity: capacity.map { min($0, room) })
        }
        switch r {
        case .length(let n): return (.length(n), key)
        case .tooSmall(let n): return (.tooSmall(n), key)
        case .written(let n): return (.bytes(Array(out.prefix(n))), key)
        }
    }

    /// C_EncapsulateKey with the ciphertext written to `output` (the caller's buffer of `capacity`
    /// bytes; nil for a length query): the C entry point's path. RSA and ECDH take the array path
    /// above; ML-KEM writes its ciphertext there without a heap copy.
    public func encapsulateKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, publicKey: CK_OBJECT_HANDLE,
                               template: Template, output: UnsafeMutableRawPointer?,
                               capacity: Int?) throws -> (DirectOutput, CK_OBJECT_HANDLE?) {
        if mechanism.isRSAKEM || mechanism.ecdhKEM != nil {
            let (r, key) = try encapsulateKey(session: h, mechanism: mechanism, publicKey: publicKey, template: template,
                                              capacity: capacity)
            switch r {
            case .length(let n): return (.length(n), key)
            case .tooSmall(let n): return (.tooSmall(n), key)
            case .bytes(let b):
                if !b.isEmpty {
                    guard let output else { throw PKCS11Error.argumentsBad }
                    b.withUnsafeBytes { output.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                }
                return (.written(b.count), key)
            }
        }
        return try mlKEMEncapsulateKey(try session(h), mechanism: mechanism, publicKey: publicKey, template: template,
                                       output: output, capacity: capacity)
    }

    /// ML-KEM's C_EncapsulateKey. The ciphertext is made in a stack buffer and copied to `output`
    /// only once the key is stored, so a failed call leaves the caller's buffer as it was.
    private func mlKEMEncapsulateKey(_ s: Session, mechanism: Mechanism, publicKey: CK_OBJECT_HANDLE, template: Template,
                                     output: UnsafeMutableRawPointer?, capacity: Int?) throws -> (DirectOutput, CK_OBJECT_HANDLE?) {
        let view = try kemKey(s, publicKey, mechanism: mechanism, cls: CKO_PUBLIC_KEY, usage: CKA_ENCAPSULATE)
        guard let kem = try self.publicKey(view).mlKEM else { throw PKCS11Error.keyTypeInconsistent }
        // CKA_ENCAPSULATE_TEMPLATE merged in first (TemplateAttributes.mergeKEM).
        let merged = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: true)
        let (keyType, length, t) = try kemKeyRequest(try merged.map())
        let n = kem.parameterSet.ciphertextLength
        switch OutputResult.decide(needed: n, capacity: capacity) {
        case .length?: return (.length(n), nil)
        case .tooSmall?: return (.tooSmall(n), nil)
        default: break
        }
        guard let output else { throw PKCS11Error.argumentsBad }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        // MLKEMParameterSet.maxCiphertextLength bytes (a generic argument must be a literal).
        var ct = InlineArray<1568, UInt8>(repeating: 0)
        var span = ct.mutableSpan
        let handle = try span.withUnsafeMutableBytes { buf -> CK_OBJECT_HANDLE in
            let c = UnsafeMutableRawBufferPointer(rebasing: buf[0..<n])
            // The secret's first CKA_VALUE_LEN bytes; the whole secret never leaves KeyshareCrypto.
            let value = try kem.encapsulate(into: c, secretLength: length)
            // CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE and CKA_LOCAL false, as 3.2 §5.18 says for
            // both functions and as the RSA and ECDH paths do: the holder of the private key, maybe
            // outside this token, learns the same secret.
            let a = try secretKeyAttributes(value: value, keyType: keyType, template: t, mechanism: CKM_ML_KEM,
                                            bornSecret: false)
            let key = try store(a, in: s)
            output.copyMemory(from: c.baseAddress!, byteCount: n)
            return key
        }
        return (.written(n), handle)
    }

    /// C_DecapsulateKey.
    public func decapsulateKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, privateKey: CK_OBJECT_HANDLE,
                               template: Template, ciphertext: [UInt8]) throws -> CK_OBJECT_HANDLE {
        // A key decapsulated with a private key is private (issue 29; ObjectRules).
        try checkInheritedPrivacy(try session(h), sources: [privateKey], templates: [template],
                                  stored: CK_ATTRIBUTE_TYPE(CKA_DECAPSULATE_TEMPLATE))
        if mechanism.isRSAKEM || mechanism.ecdhKEM != nil {
            return try classicDecapsulateKey(try session(h), mechanism: mechanism, privateKey: privateKey, template: template,
                                             ciphertext: ciphertext)
        }
        return try ciphertext.withUnsafeBytes {
            try mlKEMDecapsulateKey(try session(h), mechanism: mechanism, privateKey: privateKey, template: template, ciphertext: $0)
        }
    }

    /// C_DecapsulateKey with the ciphertext read in place (the C entry point's path; the caller's
    /// memory is valid for the call): ML-KEM decapsulates from it without a heap copy.
    public func decapsulateKey(session h: CK_SESSION_HANDLE, mechanism: Mechanism, privateKey: CK_OBJECT_HANDLE,
                               template: Template, ciphertext: UnsafeRawBufferPointer) throws -> CK_OBJECT_HANDLE {
        try checkInheritedPrivacy(try session(h), sources: [privateKey], templates: [template],
                                  stored: CK_ATTRIBUTE_TYPE(CKA_DECAPSULATE_TEMPLATE))
        if mechanism.isRSAKEM || mechanism.ecdhKEM != nil {
            return try classicDecapsulateKey(try session(h), mechanism: mechanism, privateKey: privateKey, template: template,
                                             ciphertext: Array(ciphertext))
        }
        return try mlKEMDecapsulateKey(try session(h), mechanism: mechanism, privateKey: privateKey, template: template,
                                       ciphertext: ciphertext)
    }

    private func classicDecapsulateKey(_ s: Session, mechanism: Mechanism, privateKey: CK_OBJECT_HANDLE, template: Template,
                                       ciphertext: [UInt8]) throws -> CK_OBJECT_HANDLE {
        if let p = mechanism.ecdhKEM {  // ECDHEncapsulation.swift
            return try ecdhDecapsulateKey(s, p, privateKey: privateKey, template: template, ciphertext: ciphertext)
        }
        // RSAEncapsulation.swift
        return try rsaDecapsulateKey(s, mechanism: mechanism, privateKey: privateKey, template: template, ciphertext: ciphertext)
    }

    private func mlKEMDecapsulateKey(_ s: Session, mechanism: Mechanism, privateKey: CK_OBJECT_HANDLE, template: Template,
                                     ciphertext: UnsafeRawBufferPointer) throws -> CK_OBJECT_HANDLE {
        let view = try kemKey(s, privateKey, mechanism: mechanism, cls: CKO_PRIVATE_KEY, usage: CKA_DECAPSULATE)
        guard let kem = try self.privateKey(view).mlKEM else { throw PKCS11Error.keyTypeInconsistent }
        // CKA_DECAPSULATE_TEMPLATE merged in first (TemplateAttributes.mergeKEM).
        let merged = try TemplateAttributes.mergeKEM(template, key: view, encapsulate: false)
        let (keyType, length, t) = try kemKeyRequest(try merged.map())
        guard ciphertext.count == kem.parameterSet.ciphertextLength else { throw PKCS11Error(CKR_WRAPPED_KEY_LEN_RANGE) }
        try checkWritable(s, isToken: try t.checkedBool(CKA_TOKEN) ?? false, isPrivate: try t.checkedBool(CKA_PRIVATE) ?? true)
        // The secret's first CKA_VALUE_LEN bytes; the whole secret never leaves KeyshareCrypto.
        let value = try kem.decapsulate(ciphertext, secretLength: length)
        // CKA_ALWAYS_SENSITIVE and CKA_NEVER_EXTRACTABLE false (3.2 §5.18, as for RSA and ECDH):
        // whoever made the ciphertext knows the secret, whatever the private key's history.
        let a = try secretKeyAttributes(value: value, keyType: keyType, template: t, mechanism: CKM_ML_KEM,
                                        bornSecret: false)
        return try store(a, in: s)
    }
}
