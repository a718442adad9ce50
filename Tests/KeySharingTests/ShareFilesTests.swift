import Foundation
import Testing
import Keychain
import KeyshareCrypto
import Tokens
@testable import KeySharing

/// The files behind the tree, from a real store: each identity's PKCS #12 is
/// built once per command and every file opens with the shared password.
@Suite(.serialized) struct ShareFilesTests {
    struct Provider {
        let home: String
        let tokens: TokenManager
        let token: TokenID
        let key: TokenKey
    }

    static func provider() throws -> Provider {
        let home = NSTemporaryDirectory() + "ks-share-\(UUID().uuidString)"
        let store = try KeychainStore(home: home, kdfLog2N: 10)
        let tokens = TokenManager(store: store)
        let record = try tokens.createSoftToken(label: "provider", soPIN: Array("so-pin".utf8), userPIN: Array("pin".utf8))
        let key = try tokens.login(record.tokenID, userPIN: Array("pin".utf8))
        for row in Fixture.shareRows {
            _ = try tokens.importPKCS12(Fixture.bytes(row.path), password: row.password, into: record.tokenID, key: key)
        }
        return Provider(home: home, tokens: tokens, token: record.tokenID, key: key)
    }

    @Test(arguments: [PKCS12.Profile.modern, .legacy])
    func wholeTreeBuildsEachIdentityOnce(_ profile: PKCS12.Profile) throws {
        let p = try Self.provider()
        defer { try? FileManager.default.removeItem(atPath: p.home) }
        let identities = try ShareFiles.shareable(tokens: p.tokens, token: p.token, key: p.key)
        #expect(identities.count == 11)
        let password = try SharedPassword.obtain(store: p.tokens.store, token: p.token, key: p.key)
        let files = ShareFiles(identities: identities, store: p.tokens.store, key: p.key, password: password, profile: profile)
        let tree = ShareTree(identities: identities.map { ShareIdentity(label: $0.label, certificate: $0.certificate) }, now: 0)
        var total = 0
        for entry in tree.allEntries { total += try files.size(of: entry) }
        #expect(total > 0)
        #expect(files.builds == 11)

        for entry in tree.root {
            let contents = try PKCS12.parse(files.bytes(of: entry), password: password)
            #expect(contents.certificate == entry.identities[0].certificate)
            #expect(contents.privateKey?.matches(entry.identities[0].certificate.publicKey) == true)
            #expect(contents.chain.isEmpty == (profile == .legacy))
        }
        let unfiltered = try #require(tree.entry("Unfiltered.zip"))
        let entries = try ShareZip.entries(of: files.bytes(of: unfiltered))
        #expect(entries.map(\.name) == unfiltered.children.map(\.fileName))
        for e in entries {
            #expect(try PKCS12.parse(e.bytes, password: password).privateKey != nil, "\(e.name)")
            #expect(throws: CryptoError.self) { try PKCS12.parse(e.bytes, password: "wrong") }
        }
        #expect(files.builds == 11)
    }

    /// The CLI's form (docs/agent.md "The share tree through the agent"): the
    /// files come prebuilt from the agent; the zips are laid out from them,
    /// byte for byte the same members, and nothing is built here.
    @Test func prebuiltFilesMakeTheSameTree() throws {
        let p = try Self.provider()
        defer { try? FileManager.default.removeItem(atPath: p.home) }
        let identities = try ShareFiles.shareable(tokens: p.tokens, token: p.token, key: p.key)
        let password = try SharedPassword.obtain(store: p.tokens.store, token: p.token, key: p.key)
        let built = ShareFiles(identities: identities, store: p.tokens.store, key: p.key, password: password, profile: .modern)
        var prebuilt: [String: [UInt8]] = [:]
        for i in identities { prebuilt[i.label] = try built.pkcs12(label: i.label) }
        let files = ShareFiles(prebuilt: prebuilt, profile: .modern)
        let tree = ShareTree(identities: identities.map { ShareIdentity(label: $0.label, certificate: $0.certificate) }, now: 0)
        for entry in tree.root { #expect(try files.bytes(of: entry) == built.bytes(of: entry)) }
        let zip = try #require(tree.entry("Unfiltered.zip"))
        let members = try ShareZip.entries(of: files.bytes(of: zip))
        #expect(members.map(\.bytes) == zip.children.map { prebuilt[$0.identities[0].label]! })
        #expect(files.builds == 0)
        #expect(throws: KeychainError.self) { try files.pkcs12(label: "no such identity") }
    }

    /// A non-exportable key never appears in the tree.
    @Test func certificateOnlyIsNotShareable() throws {
        let p = try Self.provider()
        defer { try? FileManager.default.removeItem(atPath: p.home) }
        let cert = try Fixture.certificate("ca/intermediate-ca.der")
        _ = try p.tokens.importCertificate(cert, into: p.token, key: p.key)
        let leafOnly = try Fixture.certificate("identities/device-ds-ke.cert.der")
        let ids = try ShareFiles.shareable(tokens: p.tokens, token: p.token, key: p.key)
        #expect(ids.count == 11 && ids.contains { $0.certificate == leafOnly } && !ids.contains { $0.certificate == cert })
    }

    /// Issue 17: an identity whose key lives in the TPM (the store holds only
    /// a TPM blob, CKA 0x80004B4D) or is marked non-exportable is left out of
    /// the tree with its reason, which the agent's reply carries to the CLI's
    /// notes; the others are offered as before.
    @Test func tpmAndNonExportableKeysAreLeftOutWithAReason() throws {
        let p = try Self.provider()
        defer { try? FileManager.default.removeItem(atPath: p.home) }
        let all = try ShareFiles.shareable(tokens: p.tokens, token: p.token, key: p.key)
        let inTPM = try #require(all.first), fixed = try #require(all.last)
        try p.tokens.store.update(try #require(inTPM.privateKeyReference), attributes: [CKA.keyshareTPM: [1, 2, 3]], key: p.key)
        try p.tokens.store.update(try #require(fixed.privateKeyReference), attributes: [CKA.extractable: [0]], key: p.key)
        let (shareable, leftOut) = try ShareFiles.partition(tokens: p.tokens, token: p.token, key: p.key)
        #expect(shareable.count == 9 && !shareable.contains { $0.label == inTPM.label || $0.label == fixed.label })
        // The notes name an identity as the keychain shows it; the tree's items go by the SHA-256.
        let shown = Dictionary(try p.tokens.identities(in: p.token, key: p.key).map { ($0.certificate.sha256Hex, $0.label) },
                               uniquingKeysWith: { a, _ in a })
        #expect(leftOut == [.init(label: shown[inTPM.label] ?? "?", reason: .tpm), .init(label: shown[fixed.label] ?? "?", reason: .notExportable)])
        #expect(leftOut[0].note == "its private key lives in the TPM and can never leave it")
        #expect(ShareTree.LeftOut.decode(ShareTree.LeftOut.encode(leftOut)) == leftOut)
        #expect(ShareTree.LeftOut.decode([]) == [])
        let tree = ShareTree(identities: shareable.map { ShareIdentity(label: $0.label, certificate: $0.certificate) },
                             leftOut: leftOut, now: 0)
        #expect(tree.leftOut == leftOut)
        #expect(!tree.allEntries.flatMap(\.identities).contains { $0.label == inTPM.label })
    }

    /// The agent's share reply packs each list into one field (a control
    /// message holds at most 64 fields: 3 per identity stopped at 21).
    @Test func shareWirePacksListsIntoOneField() throws {
        let parts: [[UInt8]] = [[], Array("device".utf8), [UInt8](repeating: 0xA5, count: 70_000), [0]]
        #expect(ShareWire.unpack(ShareWire.pack(parts)) == parts)
        #expect(ShareWire.unpack([]) == [])
        let packed = ShareWire.pack(parts)
        #expect(ShareWire.unpack(Array(packed.dropLast())) == nil)
        #expect(ShareWire.unpack([0, 0, 1]) == nil)
    }
}
