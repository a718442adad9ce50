/// PKCS #11 numbers the store and its callers agree on. Keychain and Tokens do
/// not import the C header (they must build without it), and namespacing them
/// avoids clashing with the C macros in the module target that imports both.
public enum CKA {
    public static let `class`: AttributeType = 0x0000
    public static let token: AttributeType = 0x0001
    public static let `private`: AttributeType = 0x0002
    public static let label: AttributeType = 0x0003
    public static let uniqueID: AttributeType = 0x0004
    public static let application: AttributeType = 0x0010
    public static let value: AttributeType = 0x0011
    public static let objectID: AttributeType = 0x0012
    public static let certificateType: AttributeType = 0x0080
    public static let issuer: AttributeType = 0x0081
    public static let serialNumber: AttributeType = 0x0082
    public static let trusted: AttributeType = 0x0086
    public static let certificateCategory: AttributeType = 0x0087
    public static let checkValue: AttributeType = 0x0090
    public static let keyType: AttributeType = 0x0100
    public static let subject: AttributeType = 0x0101
    public static let id: AttributeType = 0x0102
    public static let sensitive: AttributeType = 0x0103
    public static let encrypt: AttributeType = 0x0104
    public static let decrypt: AttributeType = 0x0105
    public static let wrap: AttributeType = 0x0106
    public static let unwrap: AttributeType = 0x0107
    public static let sign: AttributeType = 0x0108
    public static let signRecover: AttributeType = 0x0109
    public static let verify: AttributeType = 0x010A
    public static let verifyRecover: AttributeType = 0x010B
    public static let derive: AttributeType = 0x010C
    public static let startDate: AttributeType = 0x0110
    public static let endDate: AttributeType = 0x0111
    public static let modulus: AttributeType = 0x0120
    public static let modulusBits: AttributeType = 0x0121
    public static let publicExponent: AttributeType = 0x0122
    public static let privateExponent: AttributeType = 0x0123
    public static let prime1: AttributeType = 0x0124
    public static let prime2: AttributeType = 0x0125
    public static let exponent1: AttributeType = 0x0126
    public static let exponent2: AttributeType = 0x0127
    public static let coefficient: AttributeType = 0x0128
    public static let prime: AttributeType = 0x0130
    public static let publicKeyInfo: AttributeType = 0x0129
    public static let valueLen: AttributeType = 0x0161
    public static let extractable: AttributeType = 0x0162
    public static let local: AttributeType = 0x0163
    public static let neverExtractable: AttributeType = 0x0164
    public static let alwaysSensitive: AttributeType = 0x0165
    public static let keyGenMechanism: AttributeType = 0x0166
    public static let modifiable: AttributeType = 0x0170
    public static let copyable: AttributeType = 0x0171
    public static let destroyable: AttributeType = 0x0172
    public static let ecParams: AttributeType = 0x0180
    public static let ecPoint: AttributeType = 0x0181
    public static let alwaysAuthenticate: AttributeType = 0x0202
    public static let wrapWithTrusted: AttributeType = 0x0210
    public static let allowedMechanisms: AttributeType = 0x4000_0600
    // PKCS #11 3.2 (pkcs11t.h of published/3-02), the post-quantum keys (issue 18).
    /// CK_ML_DSA/ML_KEM/SLH_DSA_PARAMETER_SET_TYPE of a post-quantum key.
    public static let parameterSet: AttributeType = 0x0000_061D
    public static let encapsulateTemplate: AttributeType = 0x0000_062A
    public static let decapsulateTemplate: AttributeType = 0x0000_062B
    /// CK_BBOOL: the public key may encapsulate / the private key may decapsulate (ML-KEM).
    public static let encapsulate: AttributeType = 0x0000_0633
    public static let decapsulate: AttributeType = 0x0000_0634
    /// The private key's seed (ML-DSA ξ, ML-KEM d || z): as sensitive as CKA_VALUE.
    public static let seed: AttributeType = 0x0000_0637
    public static let vendorDefined: AttributeType = 0x8000_0000
    /// The private key's PKCS #8 DER ('KS'), always encrypted at rest.
    public static let keysharePKCS8: AttributeType = 0x8000_4B53
    /// On a key proxy of an external token ('KE'): the CKA_ID of the private
    /// key on the card, where every operation is routed. Not secret.
    public static let keyshareExternal: AttributeType = 0x8000_4B45
    /// On a private key of a TPM token ('KM', not 'KT': that is KeyShare's application tag): the key's TPM blob (public area
    /// and the private area encrypted by the TPM under its storage root key).
    /// Useless without that TPM; every operation with the key runs in it.
    public static let keyshareTPM: AttributeType = 0x8000_4B4D
    /// CK_BBOOL on a certificate ('KC'): a chain member imported with an
    /// identity, kept for trust evaluation and export but not a PKCS #11
    /// object (the module does not show it), so a token holds one certificate
    /// per identity for consumers that take "the" certificate of a token
    /// (systemd-cryptenroll --pkcs11-token-uri=auto, kinit). `keyshare import
    /// --with-chain`, a certificate imported on its own or made an anchor clear it.
    public static let keyshareChainOnly: AttributeType = 0x8000_4B43
}

public enum CKO {
    public static let data: UInt = 0
    public static let certificate: UInt = 1
    public static let publicKey: UInt = 2
    public static let privateKey: UInt = 3
    public static let secretKey: UInt = 4
    public static let vendorDefined: UInt = 0x8000_0000
}

public enum CKK {
    public static let rsa: UInt = 0
    public static let dsa: UInt = 1
    public static let dh: UInt = 2
    public static let ec: UInt = 3
    public static let genericSecret: UInt = 0x10
    // Legacy DES family (PKCS #11 3.0 §2.29) and ChaCha20: named by the CLI.
    public static let des: UInt = 0x13
    public static let des2: UInt = 0x14
    public static let des3: UInt = 0x15
    public static let chacha20: UInt = 0x33
    public static let aes: UInt = 0x1F
    public static let ecEdwards: UInt = 0x40
    public static let ecMontgomery: UInt = 0x41
    // PKCS #11 3.2.
    public static let mlKEM: UInt = 0x49
    public static let mlDSA: UInt = 0x4A
    public static let slhDSA: UInt = 0x4B
}

public enum CKC {
    public static let x509: UInt = 0
}

/// CKA_CERTIFICATE_CATEGORY values.
public enum CertificateCategory {
    public static let unspecified: UInt = 0
    public static let tokenUser: UInt = 1
    public static let authority: UInt = 2
    public static let otherEntity: UInt = 3
}

public enum CKM {
    public static let rsaPKCSKeyPairGen: UInt = 0x0000
    public static let ecKeyPairGen: UInt = 0x1040
    public static let ecEdwardsKeyPairGen: UInt = 0x1055
    public static let ecMontgomeryKeyPairGen: UInt = 0x1056
    // PKCS #11 3.2.
    public static let mlKEMKeyPairGen: UInt = 0x0F
    public static let mlKEM: UInt = 0x17
    public static let mlDSAKeyPairGen: UInt = 0x1C
    public static let mlDSA: UInt = 0x1D
    public static let hashMLDSA: UInt = 0x1F
    public static let slhDSAKeyPairGen: UInt = 0x2D
    public static let slhDSA: UInt = 0x2E
}
