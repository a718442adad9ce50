import KeyshareCrypto

/// The key-sharing 2025 type of an identity (spec §1). Only Key Usage and
/// the SAN decide it; EKU, policies and subject are deliberately ignored.
public enum CertificateCategory: String, Sendable, CaseIterable {
    case device, signature, encryption, authentication, unknown

    /// Rows of the spec's table, top to bottom, first fit wins. An "only"
    /// row fits when no other Key Usage bit is set.
    public init(certificate: Certificate) {
        guard let ku = certificate.keyUsage else {
            self = .unknown
            return
        }
        let names = certificate.subjectAltNames
        let hasEmail = names.contains { if case .rfc822 = $0 { true } else { false } }
        let hasUPN = names.contains { if case .upn = $0 { true } else { false } }
        if ku.isSuperset(of: [.digitalSignature, .keyEncipherment]) {
            self = .device
        } else if ku.isSuperset(of: [.digitalSignature, .nonRepudiation]) {
            self = .signature
        } else if ku == .digitalSignature {
            self = hasEmail ? .signature : hasUPN ? .authentication : .device
        } else if ku == .keyEncipherment {
            self = .encryption
        } else {
            self = .unknown
        }
    }

    /// The type word in display file names; authentication shows as "piv".
    public var displayType: String {
        self == .authentication ? "piv" : rawValue
    }

    /// `<type>_<SERIAL>.p12`, e.g. `piv_8E2F55A1.p12` (spec §3).
    public func displayFileName(for certificate: Certificate) -> String {
        "\(displayType)_\(certificate.serialHex).p12"
    }
}
