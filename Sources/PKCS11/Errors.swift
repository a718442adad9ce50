import CPKCS11
import Keychain
import KeyshareCrypto

/// The one error type of the semantics layer: a CK_RV. Lower layers' errors
/// are mapped here, in one place, so every entry point agrees on them.
public struct PKCS11Error: Error, Equatable, Sendable, CustomStringConvertible {
    public let rv: CK_RV
    public init(_ rv: CK_RV) { self.rv = rv }
    public var description: String { ReturnValue.name(rv) }

    public static let argumentsBad = PKCS11Error(CKR_ARGUMENTS_BAD)
    public static let generalError = PKCS11Error(CKR_GENERAL_ERROR)
    public static let notInitialized = PKCS11Error(CKR_CRYPTOKI_NOT_INITIALIZED)
    public static let slotIDInvalid = PKCS11Error(CKR_SLOT_ID_INVALID)
    public static let sessionHandleInvalid = PKCS11Error(CKR_SESSION_HANDLE_INVALID)
    public static let objectHandleInvalid = PKCS11Error(CKR_OBJECT_HANDLE_INVALID)
    public static let keyHandleInvalid = PKCS11Error(CKR_KEY_HANDLE_INVALID)
    public static let functionNotSupported = PKCS11Error(CKR_FUNCTION_NOT_SUPPORTED)
    public static let mechanismInvalid = PKCS11Error(CKR_MECHANISM_INVALID)
    public static let mechanismParamInvalid = PKCS11Error(CKR_MECHANISM_PARAM_INVALID)
    public static let operationActive = PKCS11Error(CKR_OPERATION_ACTIVE)
    public static let operationNotInitialized = PKCS11Error(CKR_OPERATION_NOT_INITIALIZED)
    public static let userNotLoggedIn = PKCS11Error(CKR_USER_NOT_LOGGED_IN)
    public static let sessionReadOnly = PKCS11Error(CKR_SESSION_READ_ONLY)
    public static let templateIncomplete = PKCS11Error(CKR_TEMPLATE_INCOMPLETE)
    public static let templateInconsistent = PKCS11Error(CKR_TEMPLATE_INCONSISTENT)
    public static let attributeValueInvalid = PKCS11Error(CKR_ATTRIBUTE_VALUE_INVALID)
    public static let attributeTypeInvalid = PKCS11Error(CKR_ATTRIBUTE_TYPE_INVALID)
    public static let attributeReadOnly = PKCS11Error(CKR_ATTRIBUTE_READ_ONLY)
    public static let dataLenRange = PKCS11Error(CKR_DATA_LEN_RANGE)
    public static let signatureInvalid = PKCS11Error(CKR_SIGNATURE_INVALID)
    public static let signatureLenRange = PKCS11Error(CKR_SIGNATURE_LEN_RANGE)
    public static let keyTypeInconsistent = PKCS11Error(CKR_KEY_TYPE_INCONSISTENT)
    public static let keyFunctionNotPermitted = PKCS11Error(CKR_KEY_FUNCTION_NOT_PERMITTED)
    public static let pinIncorrect = PKCS11Error(CKR_PIN_INCORRECT)
    public static let pinLenRange = PKCS11Error(CKR_PIN_LEN_RANGE)
    public static let actionProhibited = PKCS11Error(CKR_ACTION_PROHIBITED)
    public static let deviceMemory = PKCS11Error(CKR_DEVICE_MEMORY)
    public static let deviceError = PKCS11Error(CKR_DEVICE_ERROR)
    public static let tokenNotPresent = PKCS11Error(CKR_TOKEN_NOT_PRESENT)
    public static let tokenNotRecognized = PKCS11Error(CKR_TOKEN_NOT_RECOGNIZED)
}

/// Maps any error thrown below the semantics layer to the CK_RV a caller sees.
/// Unknown errors become CKR_GENERAL_ERROR rather than crashing the host.
public func returnValue(for error: any Error) -> CK_RV {
    switch error {
    case let e as PKCS11Error: return e.rv
    case let e as KeychainError:
        switch e {
        case .itemNotFound: return CKR_OBJECT_HANDLE_INVALID
        case .duplicateItem: return CKR_TEMPLATE_INCONSISTENT
        case .tokenNotFound: return CKR_TOKEN_NOT_PRESENT
        case .tokenExists: return CKR_GENERAL_ERROR
        case .pinIncorrect: return CKR_PIN_INCORRECT
        case .pinLocked: return CKR_PIN_LOCKED
        case .pinNotInitialized: return CKR_USER_PIN_NOT_INITIALIZED
        case .keyRequired: return CKR_USER_NOT_LOGGED_IN
        case .decryptionFailed: return CKR_DEVICE_ERROR
        case .storage: return CKR_DEVICE_ERROR
        case .invalidArgument: return CKR_ARGUMENTS_BAD
        // A write on a store that cannot be written (read-only mount): the
        // token is write-protected; reading, login and signing still work.
        case .readOnlyStore: return CKR_TOKEN_WRITE_PROTECTED
        // Out of disk space: the spec's "token has insufficient memory".
        case .storeFull: return CKR_DEVICE_MEMORY
        // A store another user could have planted is refused (C_Initialize).
        case .insecurePath: return CKR_DEVICE_ERROR
        case .deviceBound: return CKR_DEVICE_ERROR
        case .tpmUnavailable: return CKR_TOKEN_NOT_PRESENT
        case .tpmLockout: return CKR_PIN_LOCKED
        }
    case let e as CryptoError:
        switch e.kind {
        case .invalidInput: return CKR_DATA_INVALID
        case .unsupported: return CKR_MECHANISM_INVALID
        case .dataTooLong: return CKR_DATA_LEN_RANGE
        case .verificationFailed: return CKR_SIGNATURE_INVALID
        case .authenticationFailed: return CKR_ENCRYPTED_DATA_INVALID
        default: return CKR_FUNCTION_FAILED
        }
    default:
        return CKR_GENERAL_ERROR
    }
}
