import Foundation
import KeySharing
import KeyshareAgent
import KeyshareCrypto

/// libFuzzer entry for the Swift parsers that read attacker-supplied bytes (issue 8).
/// One binary, the target chosen by KEYSHARE_FUZZ_TARGET (pkcs12, x509, password, control),
/// so a single sanitized build serves every target. Built only with
/// KEYSHARE_SANITIZE=1 (Package.swift); run by Tests/fuzz/run-fuzz.sh.
/// The Swift regression replay of the corpora is Tests/KeySharingTests/FuzzCorpusTests.swift
/// (control: Tests/integration/62-fuzz-replay.sh, through the release CLI's decoder).
enum Target: String { case pkcs12, x509, password, control }

nonisolated(unsafe) private var target: Target? = nil

/// libFuzzer's driver entry (LLVMFuzzerRunDriver, a C function of the fuzzer runtime).
/// SwiftPM links an executable target with `main` aliased to `<module>_main`, so the
/// runtime's own `main` is never used: this `main` hands control to the driver.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@_cdecl("keyshare_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var c = argc
    var v = argv
    return LLVMFuzzerRunDriver(&c, &v) { data, size in fuzzOne(data, size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    if target == nil {
        let name = ProcessInfo.processInfo.environment["KEYSHARE_FUZZ_TARGET"] ?? "x509"
        guard let t = Target(rawValue: name) else { fatalError("unknown KEYSHARE_FUZZ_TARGET \(name)") }
        target = t
    }
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    switch target! {
    case .pkcs12:
        // The fixtures' password first (reaches the bag parsers), then a wrong one (MAC path).
        _ = try? PKCS12.parse(bytes, password: "keyshare-test")
        _ = try? PKCS12.parse(bytes, password: "")
    case .x509:
        if let cert = try? Certificate(der: bytes) {
            let category = CertificateCategory(certificate: cert)
            _ = category.displayFileName(for: cert)
            _ = (cert.subject, cert.issuer, cert.serialHex, cert.subjectAltNames, cert.keyUsage, cert.isCA)
            _ = try? cert.publicKey.spkiDER()
        }
        if let text = String(bytes: bytes, encoding: .utf8) { _ = try? Certificate.parseAll(pem: text) }
    case .password:
        _ = PasswordProtocol.validate(bytes)
        _ = try? JSONDecoder().decode(PasswordProtocol.Reply.self, from: Data(bytes))
    case .control:
        // The agent's control requests (and the CLI's replies): ControlProtocol's decoder,
        // with its round trip checked (ControlProtocol.fuzzDecode).
        _ = ControlProtocol.fuzzDecode(bytes)
    }
    return 0
}
