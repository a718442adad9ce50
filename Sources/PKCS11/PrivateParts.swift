import CPKCS11
import Keychain
import KeyshareCrypto

/// The components of a private key (CKA_PRIVATE_EXPONENT, CKA_PRIME_1, ...,
/// EC/Ed25519 CKA_VALUE) computed from its PKCS #8 on demand. They are never
/// stored as attributes, so a key made sensitive later has no copy of its
/// parts lying around; ObjectRules only asks for them when the key is
/// CKA_SENSITIVE=false and CKA_EXTRACTABLE=true.
enum PrivateParts {
    static func component(_ view: ObjectView, _ type: CK_ATTRIBUTE_TYPE) -> [UInt8]? {
        guard let der = view.attributes[CKA.keysharePKCS8], let k = try? PrivateKey(der: der) else { return nil }
        switch k.keyType {
        case .rsa:
            guard let c = try? k.rsaPrivateComponents() else { return nil }
            switch type {
            case CKA_PRIVATE_EXPONENT: return c.d
            case CKA_PRIME_1: return c.p
            case CKA_PRIME_2: return c.q
            case CKA_EXPONENT_1: return c.dp
            case CKA_EXPONENT_2: return c.dq
            case CKA_COEFFICIENT: return c.qinv
            default: return nil
            }
        case .ec:
            return type == CKA_VALUE ? try? k.ecPrivateScalar() : nil
        case .ed25519, .ed448, .x25519, .x448:
            return type == CKA_VALUE ? try? k.ecxPrivateRaw() : nil
        case .mlDSA, .mlKEM, .slhDSA:
            // PKCS #11 3.2: CKA_VALUE is the FIPS-encoded private key, CKA_SEED the seed it came from.
            if type == CKA_VALUE { return try? k.postQuantumPrivateBytes() }
            if type == CKA.seed { return k.postQuantumSeed }
            return nil
        }
    }
}
