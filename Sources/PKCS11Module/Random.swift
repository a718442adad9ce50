import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.15: random number generation.

@c @implementation
public func ks_C_SeedRandom(_ hSession: CK_SESSION_HANDLE, _ pSeed: UnsafeMutablePointer<CK_BYTE>?,
                            _ ulSeedLen: CK_ULONG) -> CK_RV {
    entry("C_SeedRandom", "hSession=\(hSession) len=\(ulSeedLen)") {
        let rt = try runtime(session: hSession)
        try rt.seedRandom(session: hSession, seed: try required(pSeed, ulSeedLen))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_GenerateRandom(_ hSession: CK_SESSION_HANDLE, _ RandomData: UnsafeMutablePointer<CK_BYTE>?,
                                _ ulRandomLen: CK_ULONG) -> CK_RV {
    entry("C_GenerateRandom", "hSession=\(hSession) len=\(ulRandomLen)") {
        let rt = try runtime(session: hSession)
        let count = try length(ulRandomLen)
        let bytes = try rt.generateRandom(session: hSession, count: count)
        guard count > 0 else { return CKR_OK }
        guard let RandomData else { throw PKCS11Error.argumentsBad }
        for (i, b) in bytes.enumerated() { RandomData[i] = b }
        return CKR_OK
    }
}
