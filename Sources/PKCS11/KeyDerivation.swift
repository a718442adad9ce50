import CPKCS11
import Keychain
import KeyshareCrypto

// C_DeriveKey with the secret-key derivations: HKDF (CKM_HKDF_DERIVE,
// CKM_HKDF_DATA; RFC 5869), the SP 800-108 counter and feedback KDFs, and
// the simple derivations (concatenation, XOR, extraction). Parameters are
// decoded in MechanismParameters+KDF.swift, the functions themselves are
// KeyshareCrypto.KDF / SP800108.
//
// Every derived key follows its inputs (PKCS #11 3.0 §5.18.5 and each
// mechanism's "rules about key sensitivity and extractability"):
// CKA_ALWAYS_SENSITIVE is true only if every input key was always
// sensitive and the new key is sensitive; CKA_NEVER_EXTRACTABLE only if
// every input key never was extractable and the new key is not; CKA_LOCAL
// is false. The usage flags get KeyUsagePolicy's secret-key defaults, and a
// derived key is never "local", so it wraps no sensitive key unless the SO
// marks it trusted (KeyUsagePolicy rule 2).

/// The protection of one input key, as the derivation rules read it.
struct KeyProtection {
    var sensitive: Bool
    var extractable: Bool
    var alwaysSensitive: Bool
    var neverExtractable: Bool

    /// Whether the module ever shows the value (C_GetAttributeValue gives a
    /// secret value only when it is not sensitive and extractable).
    var valueHidden: Bool { sensitive || !extractable }

    init(sensitive: Bool, extractable: Bool, alwaysSensitive: Bool, neverExtractable: Bool) {
        (self.sensitive, self.extractable, self.alwaysSensitive, self.neverExtractable) =
            (sensitive, extractable, alwaysSensitive, neverExtractable)
    }

    init(_ view: ObjectView) {
        if view.objectClass == CKO_DATA {
            // A data object's value is readable by anyone who sees the object.
            (sensitive, extractable, alwaysSensitive, neverExtractable) = (false, true, false, false)
            return
        }
        sensitive = view.bool(CKA_SENSITIVE) ?? true
        extractable = view.bool(CKA_EXTRACTABLE) ?? false
        alwaysSensitive = view.bool(CKA_ALWAYS_SENSITIVE) ?? false
        neverExtractable = view.bool(CKA_NEVER_EXTRACTABLE) ?? false
    }
}

/// The secret key a derivation template asks for.
struct DerivedKeyRequest {
    var keyType: CK_KEY_TYPE
    /// CKA_VALUE_LEN, when the template gives it.
    var length: Int?
    var template: AttributeMap

    /// Secret key types a derivation may make: the ones keyshare can use.
    static let keyTypes: Set<CK_KEY_TYPE> = Runtime.hmacKeyTypes.union([CKK_HKDF])

    /// - Parameter also: key types this derivation may make besides `keyTypes`
    ///   (the DES family for the ENCRYPT_DATA derivations).
    init(_ t: AttributeMap, also: Set<CK_KEY_TYPE> = []) throws {
        if let c = try t.checkedULong(CKA_CLASS), c != CKO_SECRET_KEY { throw PKCS11Error.templateInconsistent }
        keyType = try t.checkedULong(CKA_KEY_TYPE) ?? CKK_GENERIC_SECRET
        guard Self.keyTypes.contains(keyType) || also.contains(keyType) else { throw PKCS11Error.templateInconsistent }
        if let n = try t.checkedULong(CKA_VALUE_LEN) {
            guard let i = Int(exactly: n), try Self.validLength(i, keyType) else { throw PKCS11Error.attributeValueInvalid }
            length = i
        }
        if t[CKA_VALUE] != nil { throw PKCS11Error.attributeReadOnly }
        template = t
        template[CKA_VALUE_LEN] = nil
    }

    static func validLength(_ n: Int, _ keyType: CK_KEY_TYPE) throws -> Bool {
        guard n >= 1, n <= KDFLimits.derivedLength else { return false }
        if let fixed = SymmetricKeys.fixedSize(keyType) { return n == fixed }  // DES, DES2, DES3
        return keyType != CKK_AES || [16, 24, 32].contains(n)
    }

    /// CKA_VALUE_LEN, or `natural` (what the mechanism gives by itself) when
    /// the template has none and `natural` suits the key type.
    func resolvedLength(natural: Int?) throws -> Int {
        if let length { return length }
        guard let natural, try Self.validLength(natural, keyType) else { throw PKCS11Error.templateIncomplete }
        return natural
    }
}

extension Runtime {
    /// A base key (or the second key of a derivation) as C_DeriveKey may
    /// use it: a secret key of one of `types` (any when nil) whose
    /// CKA_DERIVE is set, with its value.
    func derivationKey(_ s: Session, _ h: CK_OBJECT_HANDLE, types: Set<CK_KEY_TYPE>?,
                       allowData: Bool = false) throws -> (ObjectView, [UInt8]) {
        let view = try resolveKey(s, h)
        if allowData, view.objectClass == CKO_DATA {
            guard let v = view.attributes[CKA_VALUE], !v.isEmpty else { throw PKCS11Error.keyTypeInconsistent }
            return (view, v)
        }
        guard view.objectClass == CKO_SECRET_KEY, let t = view.keyType, types?.contains(t) ?? true else {
            throw PKCS11Error.keyTypeInconsistent
        }
        guard view.bool(CKA_DERIVE) == true else { throw PKCS11Error.keyFunctionNotPermitted }
        guard let v = view.attributes[CKA_VALUE], !v.isEmpty else { throw PKCS11Error.keyTypeInconsistent }
        return (view, v)
    }

    /// The attribute set of a derived secret key. `defaults` supplies
    /// CKA_SENSITIVE / CKA_EXTRACTABLE when the template omits them (the base
    /// key's, for HKDF and SP 800-108); `forceSensitive` / `forceUnextractable`
    /// override the template (the simple derivations: "if the base key has
    /// its CKA_SENSITIVE attribute set to CK_TRUE, so does the derived key",
    /// as SoftHSM2, Kryoptic and NSS apply it, silently).
    func derivedSecret(value: [UInt8], _ r: DerivedKeyRequest, mechanism: CK_MECHANISM_TYPE, inputs: [KeyProtection],
                       defaults: KeyProtection?, forceSensitive: Bool = false,
                       forceUnextractable: Bool = false) throws -> AttributeMap {
        var t = r.template
        if let defaults {
            if t[CKA_SENSITIVE] == nil { t[CKA_SENSITIVE] = AttributeCoding.bool(defaults.sensitive) }
            if t[CKA_EXTRACTABLE] == nil { t[CKA_EXTRACTABLE] = AttributeCoding.bool(defaults.extractable) }
        }
        _ = try t.checkedBool(CKA_SENSITIVE)
        _ = try t.checkedBool(CKA_EXTRACTABLE)
        if forceSensitive { t[CKA_SENSITIVE] = AttributeCoding.bool(true) }
        if forceUnextractable { t[CKA_EXTRACTABLE] = AttributeCoding.bool(false) }
        var a = try secretKeyAttributes(value: value, keyType: r.keyType, template: t, mechanism: mechanism)
        let sensitive = a.bool(CKA_SENSITIVE) ?? true
        let extractable = a.bool(CKA_EXTRACTABLE) ?? false
        a[CKA_ALWAYS_SENSITIVE] = AttributeCoding.bool(sensitive && inputs.allSatisfy(\.alwaysSensitive))
        a[CKA_NEVER_EXTRACTABLE] = AttributeCoding.bool(!extractable && inputs.allSatisfy(\.neverExtractable))
        return a
    }

    // MARK: - HKDF

    static let hkdfKeyTypes: Set<CK_KEY_TYPE> = [CKK_GENERIC_SECRET, CKK_HKDF]

    /// CKM_HKDF_DERIVE / CKM_HKDF_DATA (Current Mechanisms §2.62). The input
    /// key is a CKK_GENERIC_SECRET or CKK_HKDF key with CKA_DERIVE, or a data
    /// object when a salt is extracted with. The spec wants the key to be
    /// HashLen long; RFC 5869 allows any IKM, and so do Kryoptic and NSS, so
    /// any length is taken. The salt key (CKF_HKDF_SALT_KEY) must be a
    /// secret key of those types with CKA_DERIVE too: its value enters an
    /// HMAC whose result may be readable, which is a use of the key.
    func deriveHKDF(_ s: Session, _ p: HKDFParameters, data: Bool, baseKey: CK_OBJECT_HANDLE,
                    template: Template) throws -> CK_OBJECT_HANDLE {
        let dataAllowed: Bool
        if case .null = p.salt { dataAllowed = false } else { dataAllowed = p.extract }
        let (base, ikm) = try derivationKey(s, baseKey, types: Self.hkdfKeyTypes, allowData: dataAllowed)
        var salt: [UInt8]?
        switch p.salt {
        case .null: salt = nil
        case .data(let d): salt = d
        case .key(let h): salt = try derivationKey(s, h, types: Self.hkdfKeyTypes).1
        }
        let hashLen = p.prf.outputSize
        let t = try template.map()
        let length: Int
        var request: DerivedKeyRequest?
        if data {
            if let c = try t.checkedULong(CKA_CLASS), c != CKO_DATA { throw PKCS11Error.templateInconsistent }
            if t[CKA_VALUE] != nil { throw PKCS11Error.attributeReadOnly }
            if let n = try t.checkedULong(CKA_VALUE_LEN) {
                guard let i = Int(exactly: n), i >= 1, i <= KDFLimits.derivedLength else {
                    throw PKCS11Error.attributeValueInvalid
                }
                length = i
            } else {
                length = hashLen
            }
        } else {
            let r = try DerivedKeyRequest(t)
            length = try r.resolvedLength(natural: hashLen)
            request = r
        }
        // Extract alone gives PRK, HashLen bytes. (Expand gives up to 255
        // HashLen, above KDFLimits.derivedLength for every hash offered.)
        if !p.expand, length != hashLen { throw PKCS11Error.templateInconsistent }

        var okm: [UInt8]
        do {
            var prk = p.extract ? try KDF.hkdfExtract(p.prf, salt: salt, ikm: ikm) : ikm
            defer { for i in prk.indices { prk[i] = 0 } }
            okm = p.expand ? try KDF.hkdfExpand(p.prf, prk: prk, info: p.info, length: length) : prk
        } catch {
            throw PKCS11Error.generalError
        }
        defer { for i in okm.indices { okm[i] = 0 } }
        let mech = data ? CKM_HKDF_DATA : CKM_HKDF_DERIVE
        guard let request else {
            // CKM_HKDF_DATA: a CKO_DATA object holding the output, private
            // unless the template says otherwise (the output is secret
            // material; a public data object would show it to every session).
            var d = t
            d[CKA_VALUE_LEN] = nil
            d[CKA_CLASS] = AttributeCoding.ulong(CKO_DATA)
            d[CKA_VALUE] = okm
            if d[CKA_PRIVATE] == nil { d[CKA_PRIVATE] = AttributeCoding.bool(true) }
            return try store(try ObjectFactory.build(d, soLoggedIn: login(for: s.tokenID)?.role == .securityOfficer), in: s)
        }
        let protection = KeyProtection(base)
        let a = try derivedSecret(value: okm, request, mechanism: mech, inputs: [protection], defaults: protection)
        return try store(a, in: s)
    }

    // MARK: - SP 800-108

    /// The base key types a PRF takes: a generic secret or the HMAC key
    /// type of its own hash (as Kryoptic), an AES key for AES-CMAC.
    static func sp800108KeyTypes(_ prf: MACAlgorithm) -> Set<CK_KEY_TYPE> {
        switch prf {
        case .cmacAES: [CKK_AES]
        case .hmac(let d): Set([CKK_GENERIC_SECRET, hmacKeyType[d]].compactMap { $0 })
        }
    }

    /// CKM_SP800_108_COUNTER_KDF / CKM_SP800_108_FEEDBACK_KDF (Current
    /// Mechanisms §2.41). Each key's CKA_VALUE_LEN is required (no key type
    /// offered has a fixed length); the keying material is cut into
    /// segments per key ("no key can be created using part of a segment
    /// that was used for another key"). CK_SP800_108_DKM_LENGTH encodes L in
    /// bits, as SP 800-108 defines it and OpenSSL's KBKDF does. Templates
    /// left out of SENSITIVE / EXTRACTABLE take the base key's ("If omitted,
    /// these attributes each take on the value of these attributes as they
    /// are defined in the base key").
    func deriveSP800108(_ s: Session, _ p: SP800108Parameters, baseKey: CK_OBJECT_HANDLE,
                        template: Template) throws -> [CK_OBJECT_HANDLE] {
        let (base, key) = try derivationKey(s, baseKey, types: Self.sp800108KeyTypes(p.prf))
        if case .cmacAES = p.prf, ![16, 24, 32].contains(key.count) { throw PKCS11Error(CKR_KEY_SIZE_RANGE) }
        var requests = [try DerivedKeyRequest(try template.map())]
        for k in p.additionalKeys { requests.append(try DerivedKeyRequest(try k.template.map())) }
        let lengths = try requests.map { try $0.resolvedLength(natural: nil) }
        let h = p.prf.outputSize
        let segments = lengths.map { ($0 + h - 1) / h }
        let blocks = segments.reduce(0, +)
        var fields: [SP800108.Field] = []
        var lengthValue: UInt64 = 0
        for d in p.data {
            switch d {
            case .iterationCounter(let bits, let le), .counter(let bits, let le):
                fields.append(.counter(bits: bits, littleEndian: le))
            case .iterationFeedback:
                fields.append(.previousBlock)
            case .dkmLength(let sumOfSegments, let bits, let le):
                lengthValue = UInt64(8 * (sumOfSegments ? blocks * h : lengths.reduce(0, +)))
                fields.append(.length(bits: bits, littleEndian: le))
            case .bytes(let b):
                fields.append(.bytes(b))
            }
        }
        // The counter (and L) must fit their widths: too narrow a field for
        // the keys asked for is a parameter the caller must change.
        for f in fields {
            switch f {
            case .counter(let bits, let le):
                guard SP800108.encode(UInt64(blocks), bits: bits, littleEndian: le) != nil else {
                    throw PKCS11Error.mechanismParamInvalid
                }
            case .length(let bits, let le):
                guard SP800108.encode(lengthValue, bits: bits, littleEndian: le) != nil else {
                    throw PKCS11Error.mechanismParamInvalid
                }
            default: break
            }
        }
        let mode: SP800108.Mode = p.feedbackIV.map { .feedback(iv: $0) } ?? .counter
        var dkm: [UInt8]
        do {
            dkm = try SP800108.derive(prf: p.prf, key: key, mode: mode, fields: fields, lengthValue: lengthValue,
                                      blocks: blocks)
        } catch {
            throw PKCS11Error.generalError
        }
        defer { for i in dkm.indices { dkm[i] = 0 } }
        let protection = KeyProtection(base)
        let mech = p.feedbackIV == nil ? CKM_SP800_108_COUNTER_KDF : CKM_SP800_108_FEEDBACK_KDF
        // Every key's attributes before any is stored: a template error leaves nothing behind.
        var sets: [AttributeMap] = []
        var offset = 0
        for (i, r) in requests.enumerated() {
            let value = Array(dkm[offset..<(offset + lengths[i])])
            sets.append(try derivedSecret(value: value, r, mechanism: mech, inputs: [protection], defaults: protection))
            offset += segments[i] * h
        }
        var made: [CK_OBJECT_HANDLE] = []
        do {
            for a in sets { made.append(try store(a, in: s)) }
        } catch {
            for k in made { try? destroyObject(session: s.handle, object: k) }
            throw error
        }
        return made
    }

    // MARK: - Simple derivations

    /// At least this many bytes of a hidden input key go into a derived key
    /// (all of it when the key is shorter), or none. PKCS #11 lets a caller
    /// cut a derived key to any CKA_VALUE_LEN, and with known data around
    /// it (CKM_CONCATENATE_DATA_AND_BASE with 15 known bytes and
    /// CKA_VALUE_LEN 16, CKM_EXTRACT_KEY_FROM_KEY or CKM_XOR_BASE_AND_DATA
    /// with CKA_VALUE_LEN 1) a key made from one unknown byte of a
    /// sensitive key is brute-forced in 256 tries through C_Sign with it;
    /// byte after byte, the whole key comes out (Clulow, "On the security of
    /// PKCS #11", CHES 2003, the "weaker key" attacks). SoftHSM2 and Kryoptic
    /// do not check this; keyshare refuses such a template with
    /// CKR_TEMPLATE_INCONSISTENT.
    static let minimumHiddenBytes = 16

    static func checkExposure(_ used: Int, of total: Int, hidden: Bool) throws {
        guard hidden, used > 0 else { return }
        if used < min(minimumHiddenBytes, total) { throw PKCS11Error.templateInconsistent }
    }

    /// The simple derivations (Current Mechanisms §2.42), any secret key
    /// type as base, CKA_DERIVE required on the base key and, for
    /// CKM_CONCATENATE_BASE_AND_KEY, on the second key too (its value is
    /// used as much as the base key's; Kryoptic does not ask for it).
    func deriveSimple(_ s: Session, _ p: SimpleDerivation, baseKey: CK_OBJECT_HANDLE,
                      template: Template) throws -> CK_OBJECT_HANDLE {
        let (base, baseValue) = try derivationKey(s, baseKey, types: nil)
        let r = try DerivedKeyRequest(try template.map())
        var inputs = [KeyProtection(base)]
        var value: [UInt8]
        switch p {
        case .concatenateBaseAndKey(let other):
            let (o, otherValue) = try derivationKey(s, other, types: nil)
            inputs.append(KeyProtection(o))
            let all = baseValue + otherValue
            let n = try r.resolvedLength(natural: all.count)
            guard n <= all.count else { throw PKCS11Error.templateInconsistent }
            try Self.checkExposure(min(n, baseValue.count), of: baseValue.count, hidden: inputs[0].valueHidden)
            try Self.checkExposure(max(0, n - baseValue.count), of: otherValue.count, hidden: inputs[1].valueHidden)
            value = Array(all.prefix(n))
        case .concatenateBaseAndData(let d):
            let n = try r.resolvedLength(natural: baseValue.count + d.count)
            guard n <= baseValue.count + d.count else { throw PKCS11Error.templateInconsistent }
            try Self.checkExposure(min(n, baseValue.count), of: baseValue.count, hidden: inputs[0].valueHidden)
            value = Array((baseValue + d).prefix(n))
        case .concatenateDataAndBase(let d):
            let n = try r.resolvedLength(natural: baseValue.count + d.count)
            guard n <= baseValue.count + d.count else { throw PKCS11Error.templateInconsistent }
            try Self.checkExposure(max(0, n - d.count), of: baseValue.count, hidden: inputs[0].valueHidden)
            value = Array((d + baseValue).prefix(n))
        case .xorBaseAndData(let d):
            let available = min(baseValue.count, d.count)
            let n = try r.resolvedLength(natural: available)
            guard n <= available else { throw PKCS11Error.templateInconsistent }
            try Self.checkExposure(n, of: baseValue.count, hidden: inputs[0].valueHidden)
            value = (0..<n).map { baseValue[$0] ^ d[$0] }
        case .extractKeyFromKey(let offset):
            // "If no length or key type is provided in the template, then an error will be returned."
            let n = try r.resolvedLength(natural: nil)
            let bits = baseValue.count * 8
            guard offset < CK_ULONG(bits) else { throw PKCS11Error.mechanismParamInvalid }
            guard n <= baseValue.count else { throw PKCS11Error.templateInconsistent }
            try Self.checkExposure(n, of: baseValue.count, hidden: inputs[0].valueHidden)
            // "If the original key used in this process is sensitive, then the
            // derived key must also be sensitive for the derivation to succeed."
            if inputs[0].sensitive, try r.template.checkedBool(CKA_SENSITIVE) == false {
                throw PKCS11Error.templateInconsistent
            }
            value = Self.extractBits(baseValue, from: Int(offset), bytes: n)
        }
        defer { for i in value.indices { value[i] = 0 } }
        let a = try derivedSecret(value: value, r, mechanism: p.mechanismType, inputs: inputs, defaults: nil,
                                  forceSensitive: inputs.contains(where: \.sensitive),
                                  forceUnextractable: inputs.contains { !$0.extractable })
        return try store(a, in: s)
    }

    /// `bytes` bytes of `key` read as a bit string b0 b1 ... (b0 the top bit
    /// of the first byte), starting at bit `from` and wrapping around the end.
    static func extractBits(_ key: [UInt8], from: Int, bytes: Int) -> [UInt8] {
        let total = key.count * 8
        var out = [UInt8](repeating: 0, count: bytes)
        for i in 0..<(bytes * 8) {
            let b = (from + i) % total
            let bit = (key[b / 8] >> (7 - UInt8(b % 8))) & 1
            out[i / 8] |= bit << (7 - UInt8(i % 8))
        }
        return out
    }
}
