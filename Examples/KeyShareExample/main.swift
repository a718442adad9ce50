// keyshare-example: the KeyShare API end to end on a throwaway keychain.
// Run: KEYSHARE_HOME=$(mktemp -d) swift run keyshare-example
// It creates a soft token, generates a tagged P-256 key pair, signs and
// verifies, stores and finds a password, and shows itemNotFound/duplicateItem.
import KeyShare

#if canImport(Glibc)
import Glibc
#endif

func show(_ line: String) { print(line) }

do {
    let home = getenv("KEYSHARE_HOME").map { String(cString: $0) } ?? "/tmp/keyshare-example-\(getpid())"
    // A low scrypt cost keeps the example quick; real stores keep the default.
    let keychain = try KeychainSession(home: home, kdfLog2N: 10, accessGroups: ["com.example.mail"])
    let pin = Array("1234".utf8)
    if (try? keychain.unlock(pin: pin)) == nil {
        try keychain.createSoftToken(label: "example", soPIN: Array("so-pin".utf8), userPIN: pin)
        try keychain.unlock(pin: pin)
    }

    // SecKeyGeneratePair: both keys are permanent items, tagged.
    let tag = Array("com.example.mail.signing".utf8)
    let pair: (privateKey: KeyRef, publicKey: KeyRef)
    do {
        pair = try keychain.generateKeyPair(KeyPairParameters(.ec(.p256), label: "mail signing", applicationTag: tag))
    } catch KeyShareError.duplicateItem {
        // Second run: the tag is taken, so look the keys up instead.
        pair = (try keychain.key(tag: tag, itemClass: .privateKey), try keychain.key(tag: tag, itemClass: .publicKey))
    }
    show("key: \(pair.privateKey.attributes.label ?? "") \(pair.privateKey.keyType) \(pair.privateKey.attributes.keySizeInBits ?? 0) bits")

    // SecKeyCreateSignature / SecKeyVerifySignature.
    let message = Array("hello from keyshare".utf8)
    let signature = try pair.privateKey.createSignature(message, algorithm: .ecdsa(.sha256))
    show("signature verifies: \(try pair.publicKey.verifySignature(signature, message: message, algorithm: .ecdsa(.sha256)))")

    // SecItemAdd / SecItemCopyMatching with a persistent reference round trip.
    let ref: PersistentReference
    do {
        ref = try keychain.add(.genericPassword(service: "imap.example.com", account: "alice", value: Array("s3cret".utf8)))
    } catch KeyShareError.duplicateItem {
        ref = try keychain.copyFirst(Query(itemClass: .genericPassword, label: "imap.example.com",
                                           returning: .persistentReference)).persistentReference!
    }
    let found = try keychain.copyFirst(Query(persistentReference: ref, returning: [.attributes, .data]))
    show("password item: \(found.attributes?.label ?? "") in group \(found.attributes?.accessGroup ?? ""), \(found.data?.count ?? 0) bytes")

    // A missing item is its own error.
    do {
        _ = try keychain.copyMatching(Query(label: "no such item"))
    } catch KeyShareError.itemNotFound {
        show("missing item: itemNotFound")
    }
} catch {
    print("keyshare-example: \(error)")
    exit(1)
}
