import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// OSSL_PARAM_BLD keeps the *pointers* it is given (names, strings, octet
/// buffers) until OSSL_PARAM_BLD_to_param, so Swift's temporary C strings
/// would dangle. This owns stable copies of everything for its lifetime.
final class ParamBuilder {
    private let bld: OpaquePointer
    private var owned: [UnsafeMutableRawPointer] = []
    private var ok = true

    init() throws {
        guard let b = OSSL_PARAM_BLD_new() else { throw CryptoError.openssl("parameters") }
        bld = b
    }

    deinit {
        OSSL_PARAM_BLD_free(bld)
        for p in owned { free(p) }
    }

    private func copy(_ s: String) -> UnsafePointer<CChar> {
        let p = strdup(s)!
        owned.append(UnsafeMutableRawPointer(p))
        return UnsafePointer(p)
    }

    func bn(_ name: String, _ value: OpaquePointer) {
        ok = ok && OSSL_PARAM_BLD_push_BN(bld, copy(name), value) == 1
    }

    func utf8(_ name: String, _ value: String) {
        ok = ok && OSSL_PARAM_BLD_push_utf8_string(bld, copy(name), copy(value), 0) == 1
    }

    func octets(_ name: String, _ value: [UInt8]) {
        let p = malloc(max(1, value.count))!
        value.withUnsafeBytes { if let b = $0.baseAddress { memcpy(p, b, value.count) } }
        owned.append(p)
        ok = ok && OSSL_PARAM_BLD_push_octet_string(bld, copy(name), p, value.count) == 1
    }

    func int(_ name: String, _ value: Int32) {
        ok = ok && OSSL_PARAM_BLD_push_int(bld, copy(name), value) == 1
    }

    /// The pushed parameters as an OSSL_PARAM array; the caller OSSL_PARAM_frees it. The builder
    /// must outlive the array (the array points at the builder's copies).
    func params(_ op: String) throws -> UnsafeMutablePointer<OSSL_PARAM> {
        guard ok, let params = OSSL_PARAM_BLD_to_param(bld) else { throw CryptoError.openssl(op) }
        return params
    }

    /// Builds an EVP_PKEY of `type` from the pushed parameters.
    func makeKey(_ type: String, selection: Int32, _ op: String) throws -> OpaquePointer {
        guard ok, let params = OSSL_PARAM_BLD_to_param(bld) else { throw CryptoError.openssl(op) }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(CryptoEngine.context, type, nil) else { throw CryptoError.openssl(op) }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_fromdata_init(ctx) == 1,
              EVP_PKEY_fromdata(ctx, &key, selection, params) == 1, let key else {
            throw CryptoError.openssl(op, kind: .invalidInput)
        }
        return key
    }
}
