import Testing
import KeyshareCrypto
@testable import KeySharing

/// Spec §3: the provider's tree for the fixture set against expected-tree.json.
@Suite struct TreeTests {
    static func tree(accepting: [ShareSelector] = []) throws -> ShareTree {
        ShareTree(identities: try Fixture.shareIdentities(), accepting: accepting, now: 1_750_000_000)
    }

    @Test func matchesExpectedTree() throws {
        let tree = try Self.tree()
        let expected = try Fixture.expectedTree()
        #expect(tree.root.map(\.fileName) == expected.root)
        #expect(tree.folders.map(\.fileName) == ["All User", "All", "PIV", "Signature", "Encryption", "Device", "Unfiltered"])
        for folder in tree.folders {
            #expect(folder.children.map(\.fileName) == expected.folders[folder.fileName], "\(folder.fileName)")
        }
        #expect(tree.zips.count == 7)
        for zip in tree.zips {
            #expect(zip.children.map(\.fileName) == expected.zips[zip.fileName], "\(zip.fileName)")
        }
    }

    @Test func identifiersTypesAndDates() throws {
        let tree = try Self.tree()
        let piv = try #require(tree.root.first { $0.fileName == "piv_8E2F55A1.p12" })
        let cert = try Fixture.certificate("identities/auth-upn-new.cert.der")
        #expect(piv.identifier == cert.sha256Hex)
        #expect(piv.selector == "purebred2025.rsa.pkcs-12")
        #expect(piv.date == cert.notBefore)
        // Leading-zero serial: DER 00 8E 2F 55 A1, name without the sign byte.
        #expect(cert.serialHex == "8E2F55A1")
        let folder = try #require(tree.folders.first { $0.fileName == "PIV" })
        #expect(folder.children.first?.identifier == "PIV.\(cert.sha256Hex)")
        #expect(folder.children.first?.selector == "purebred2025.select.authentication-p12")
        let zip = try #require(tree.entry("PIV.zip"))
        #expect(zip.kind == .zip && zip.date == 1_750_000_000 && zip.selector == "purebred2025.zip.authentication")
        #expect(tree.entry("Unfiltered.\(cert.sha256Hex)") != nil)
        #expect(tree.entry("nope") == nil)
    }

    /// Folders and zips are there even with nothing to share.
    @Test func emptyTreeStillHasFoldersAndZips() {
        let tree = ShareTree(identities: [], now: 0)
        #expect(tree.root.isEmpty && tree.folders.count == 7 && tree.zips.count == 7)
        #expect(tree.folders.allSatisfy { $0.children.isEmpty })
    }

    @Test func selectorsGreyOutWhatTheyDoNotAccept() throws {
        let tree = try Self.tree(accepting: [ShareSelector("purebred2025.zip.authentication")!])
        #expect(tree.zips.filter(\.selectable).map(\.fileName) == ["PIV.zip"])
        #expect(tree.root.allSatisfy { !$0.selectable })
        let underscore = try Self.tree(accepting: [ShareSelector("purebred2025.select.all_user")!])
        let legacy = try Self.tree(accepting: [ShareSelector("purebred.select.all-user")!])
        for t in [underscore, legacy] {
            let allUser = try #require(t.folders.first { $0.fileName == "All User" })
            #expect(allUser.selectable && allUser.children.allSatisfy(\.selectable))
            #expect(t.root.filter(\.selectable).map(\.fileName)
                    == ["encryption_0C3A5E.p12", "encryption_4D2E1F00.p12", "encryption_6E.p12", "piv_8E2F55A1.p12", "signature_01.p12"])
            #expect(t.zips.allSatisfy { !$0.selectable })
        }
        let any = try Self.tree(accepting: [.pkcs12])
        #expect(any.root.allSatisfy(\.selectable) && any.zips.allSatisfy { !$0.selectable })
        #expect(try Self.tree().zips.allSatisfy(\.selectable))
    }

    /// Same type and serial from two issuers must not overwrite each other.
    @Test func clashingDisplayNamesAreMadeUnique() throws {
        let a = try Fixture.certificate("identities/device-ds-ke.cert.der")
        let ids = [ShareIdentity(label: "AAAAAAAA11", certificate: a), ShareIdentity(label: "BBBBBBBB22", certificate: a)]
        let names = ShareTree(identities: ids, now: 0).folders[1].children.map(\.fileName)
        #expect(Set(names).count == 2)
        #expect(names.allSatisfy { $0.hasPrefix("device_048F") })
    }
}
