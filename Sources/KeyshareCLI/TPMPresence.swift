#if canImport(Glibc)
import Glibc
#endif
import Keychain

/// Whether `keyshare token create` seals a new soft token to a TPM by default
/// (issue 28 item 5, docs/tpm.md "Sealed by default"): a copied keychain.db of
/// a sealed token cannot be guessed at offline, the TPM must take part in every
/// guess. A TPM counts when the user points at one (KEYSHARE_TCTI, or the
/// store's `keyshare token tpm-config --tcti`), or when the kernel's resource
/// manager /dev/tpmrm0 exists and this user may open it. Without one nothing
/// changes: the token is not sealed and the short-PIN rule applies.
enum TPMPresence {
    enum Answer: Equatable {
        /// A TPM to seal to, at this TCTI.
        case usable(String)
        /// No TPM on this machine.
        case absent
        /// A TPM is there, this user cannot open it: why, for a note.
        case unusable(String)
    }

    static let device = "/dev/tpmrm0"

    static func probe(_ store: KeychainStore) -> Answer {
        let tcti = store.tpmTCTI()
        let fromEnvironment = getenv("KEYSHARE_TCTI").map { String(cString: $0) }.map { !$0.isEmpty } ?? false
        let configured = ((try? store.configuredTCTI()) ?? nil).map { !$0.isEmpty } ?? false
        if fromEnvironment || configured { return .usable(tcti) }
        guard access(device, F_OK) == 0 else { return .absent }
        guard access(device, R_OK | W_OK) == 0 else {
            return .unusable("this machine has a TPM (\(device)) that you cannot open (\(String(cString: strerror(errno))); "
                + "the tss group may open it): the token is not sealed to it")
        }
        return .usable(tcti)
    }
}
