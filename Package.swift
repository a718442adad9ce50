// swift-tools-version: 6.2
import PackageDescription

// Layers (DESIGN.md §2): Crypto <- Keychain <- Tokens <- {PKCS11, KeySharing} <- CLI.
// Nothing below imports anything above. Crypto, Keychain, Tokens and PKCS11 are
// linked into libkeyshare-pkcs11.so and must stay free of Foundation.

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .treatAllWarnings(as: .error),
]

// KEYSHARE_SANITIZE=1 (only for the .build-asan/.build-tsan/.build-fuzz scratch paths, issue 8):
// a sanitized module gets its sanitizer runtime from the host, so `-z defs` must go, and the
// libFuzzer harness target `keyshare-fuzz` (Tests/fuzz/swift) is added. Unset: the normal package.
let sanitizerBuild = Context.environment["KEYSHARE_SANITIZE"] == "1"

// Full RELRO (what Debian's hardening=+all gives packages): every relocation is resolved at load
// and the GOT is then read-only, so a memory bug in a host cannot redirect the module's or the
// CLI's calls through it. The cost is resolving the few hundred external symbols once at dlopen.
let hardeningFlags = ["-Xlinker", "-z", "-Xlinker", "relro", "-Xlinker", "-z", "-Xlinker", "now"]

// Size (issue 28): linked with lld, the Swift toolchain's own linker, which packs the relative
// relocations of these position-independent binaries (DT_RELR, read by glibc 2.36+: Debian 12 and
// later); gold, the default, cannot. Measured: the module 15.4 -> 14.2 MB, the CLI 25.3 -> 23.5 MB
// stripped. (--icf=all would fold 0.4 MB more but breaks C code that compares function pointers.)
let sizeFlags = ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]

// libkeyshare-engine.so (docs/architecture.md, "Images"): the Swift layers, the Swift runtime and
// the static OpenSSL, once, for the CLI and agent (through the launcher) and the module's
// in-process mode. Exports only keyshare_main_v1 and keyshare_engine_pkcs11_v1.
let engineLinkFlags: [LinkerSetting] = [
    .unsafeFlags([
        "-Xlinker", "--version-script=\(Context.packageDirectory)/pkcs11/keyshare-engine.map",
        // Swift runtime threads must not be unmapped when a host dlcloses the module.
        "-Xlinker", "-z", "-Xlinker", "nodelete",
    ] + hardeningFlags + sizeFlags + (sanitizerBuild ? [] : ["-Xlinker", "-z", "-Xlinker", "defs"])),
]

let package = Package(
    name: "keyshare",
    products: [
        // libkeyshare-engine.so. The other two images, libkeyshare-pkcs11.so (what hosts load: the
        // agent client, pkcs11/client) and /usr/bin/keyshare (the launcher, Sources/Launcher), are
        // plain C built by the Makefile: swiftc would link the Swift runtime into them.
        .library(name: "keyshare-engine", type: .dynamic, targets: ["KeyshareCLI"]),
        .library(name: "KeyShare", targets: ["KeyShare"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // System libraries: thin module maps over the Debian packages.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CPKCS11", path: "pkcs11/types"),
        // tpm2-tss: ESAPI, the TCTI loader, marshalling, response codes (docs/tpm.md).
        .systemLibrary(name: "CTSS2", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),
        // Linux calls with variadic C prototypes (prctl), as inline wrappers.
        .systemLibrary(name: "CLinux"),
        // libsystemd's journal, for the agent's audit records (Sources/KeyshareAgent/Audit.swift).
        // zlib: crc32 and raw inflate for the share zips (Sources/KeySharing/ShareZip.swift).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // dladdr (where the bundled OpenSSL's legacy provider is) and the bundle's glibc shim (issue 18).
        .target(name: "COpenSSLSupport", dependencies: ["COpenSSL"], path: "Sources/COpenSSLSupport"),

        // Layers.
        .target(name: "KeyshareCrypto", dependencies: ["COpenSSL", "COpenSSLSupport"], swiftSettings: strict),
        // The TPM (docs/tpm.md): C over ESAPI (TPMCore), a small Swift layer over it. Below Keychain,
        // which seals TPM tokens' keys and device-bound soft tokens with it.
        .target(name: "TPMCore", dependencies: ["CTSS2"], path: "Sources/TPMCore",
                linkerSettings: ["tss2-esys", "tss2-tctildr", "tss2-mu", "tss2-rc"].map { .linkedLibrary($0) }),
        .target(name: "KeyshareTPM", dependencies: ["TPMCore", "KeyshareCrypto"], swiftSettings: strict),
        .target(name: "Keychain", dependencies: ["KeyshareCrypto", "KeyshareTPM", "CSQLite"], swiftSettings: strict),
        .target(name: "Tokens", dependencies: ["Keychain", "KeyshareCrypto", "KeyshareTPM", "CPKCS11"], swiftSettings: strict),
        .target(name: "PKCS11", dependencies: ["Tokens", "Keychain", "KeyshareCrypto", "KeyshareTPM", "CPKCS11"], swiftSettings: strict),
        .target(
            name: "KeySharing",
            dependencies: ["Tokens", "Keychain", "KeyshareCrypto", "CLinux", "CZlib"],
            swiftSettings: strict),

        // The public Swift API (SecItem / SecKey / SecTrust counterparts), a facade over the layers.
        .target(name: "KeyShare", dependencies: ["Tokens", "Keychain", "KeyshareCrypto"], swiftSettings: strict),
        .executableTarget(name: "keyshare-example", dependencies: ["KeyShare"], path: "Examples/KeyShareExample",
                          swiftSettings: strict),

        // The C ABI layer: function tables as static data, only the three C_Get* exported.
        // The agent protocol (docs/agent.md): frames, codecs, the agent-side dispatcher. C, shared by the
        // module's client and the agent.
        .target(name: "AgentProtocol", path: "Sources/AgentProtocol"),
        // The engine's side: the in-process function tables, the fork handlers, the 3.2 serve helpers.
        .target(
            name: "CPKCS11ABI",
            dependencies: ["CPKCS11", "AgentProtocol"],
            path: "pkcs11/abi"),
        // The entries; linked into the engine, which serves the agent's calls and in-process mode with them.
        .target(
            name: "PKCS11Module",
            dependencies: ["PKCS11", "CPKCS11ABI", "CPKCS11"],
            swiftSettings: strict),
        // The per-user agent: holds the store, the logins and the keys; serves the module's clients.
        .target(
            name: "KeyshareAgent",
            dependencies: ["PKCS11Module", "PKCS11", "Keychain", "KeyshareCrypto", "AgentProtocol", "CPKCS11ABI",
                           "CPKCS11", "CLinux", "CSystemd", "KeySharing", "KeyShare", "Tokens"],
            swiftSettings: strict),

        // The CLI (and `keyshare agent`), linked into the engine with every layer below it.
        .target(
            name: "KeyshareCLI",
            dependencies: [
                "KeySharing", "KeyShare", "Tokens", "Keychain", "KeyshareCrypto", "CLinux", "KeyshareAgent",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict,
            linkerSettings: engineLinkFlags),

        .testTarget(name: "KeyshareCryptoTests", dependencies: ["KeyshareCrypto"], swiftSettings: strict),
        .testTarget(name: "KeyshareTPMTests", dependencies: ["KeyshareTPM", "KeyshareCrypto", "KeychainTestSupport"], swiftSettings: strict),
        // Shared test helpers (a throwaway store home); only test targets depend on it.
        .target(name: "KeychainTestSupport", dependencies: ["Keychain"], path: "Tests/KeychainTestSupport", swiftSettings: strict),
        .testTarget(name: "KeychainTests", dependencies: ["Keychain", "KeyshareCrypto", "KeychainTestSupport"], swiftSettings: strict),
        .testTarget(name: "TokensTests", dependencies: ["Tokens", "Keychain", "KeyshareCrypto", "KeychainTestSupport"], swiftSettings: strict),
        .testTarget(name: "KeySharingTests", dependencies: ["KeySharing", "Tokens", "KeyshareCrypto"], swiftSettings: strict),
        .testTarget(name: "KeyShareTests", dependencies: ["KeyShare"], swiftSettings: strict),
        // PKCS11: the module's mechanism list and parameter decoder, which the codec must cover.
        .testTarget(name: "AgentProtocolTests", dependencies: ["AgentProtocol", "CPKCS11", "PKCS11"], swiftSettings: strict),
        .testTarget(name: "PKCS11Tests", dependencies: ["PKCS11", "Tokens", "CPKCS11"], swiftSettings: strict),
    ]
)

if sanitizerBuild {
    package.targets.append(.executableTarget(
        name: "keyshare-fuzz",
        dependencies: ["KeySharing", "KeyshareCrypto", "KeyshareAgent"],
        path: "Tests/fuzz/swift",
        swiftSettings: strict + [.unsafeFlags(["-parse-as-library"])]))
}
