import Testing
@testable import KeyshareCrypto

/// CKA_EC_PARAMS as explicit ECParameters (python-pkcs11's
/// test_import_key_params; SoftHSM2 takes them): a set equal to a named curve
/// is that curve, any other set is not a curve keyshare holds keys on.
@Suite struct ExplicitCurveTests {
    /// `openssl ecparam -name prime256v1 -param_enc explicit -outform DER`.
    static let explicitP256 = hex("""
        3081f7020101302c06072a8648ce3d0101022100ffffffff00000001000000000000000000000000ffffffffffffffffffffffff\
        305b0420ffffffff00000001000000000000000000000000fffffffffffffffffffffffc04205ac635d8aa3a93e7b3ebbd557698\
        86bc651d06b0cc53b0f63bce3c3e27d2604b031500c49d360886e704936a6678e1139d26b7819f7e900441046b17d1f2e12c4247\
        f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb64068\
        37bf51f5022100ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551020101
        """)

    static func hex(_ s: String) -> [UInt8] {
        let c = Array(s.utf8).filter { $0 != 0x0A && $0 != 0x20 }
        return stride(from: 0, to: c.count, by: 2).map { UInt8(String(decoding: c[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    @Test func explicitParametersOfANamedCurveAreThatCurve() {
        #expect(ECCurve(paramsDER: Self.explicitP256) == .p256)
        #expect(ECCurve(paramsDER: ECCurve.p384.paramsDER) == .p384)
    }

    @Test func otherCurvesAndBadDERAreRefused() {
        var b = Self.explicitP256
        // One byte of the curve changed: no named curve, so not a curve keyshare takes.
        let i = b.firstIndex(of: 0x4b)!
        b[i] ^= 1
        #expect(ECCurve(paramsDER: b) == nil)
        #expect(ECCurve(paramsDER: Self.explicitP256 + [0]) == nil, "trailing bytes")
        #expect(ECCurve(paramsDER: Array(Self.explicitP256.dropLast(3))) == nil, "truncated")
        #expect(ECCurve(paramsDER: [0x30, 0x00]) == nil)
    }
}
