import Foundation
import Testing
import KeyshareCrypto
@testable import KeySharing

/// Spec §1–§2 on the fixture set: categories, the default newest-per-type
/// filter (ties kept, every encryption generation kept) and no-filter.
@Suite struct FilterTests {
    @Test func shareSetHasElevenIdentitiesRSAAndEC() throws {
        let rows = Fixture.shareRows
        #expect(rows.count == 11)
        #expect(rows.contains { $0.key.hasPrefix("RSA") } && rows.contains { $0.key.hasPrefix("EC") })
    }

    @Test(arguments: Fixture.shareRows.map(\.identity))
    func categoryAndDefaultOfferPerRow(_ id: String) throws {
        let row = try #require(Fixture.shareRows.first { $0.identity == id })
        let all = try Fixture.shareIdentities()
        let me = try #require(all.first { $0.certificate == (try? Fixture.certificate(row.certDER)) })
        #expect(me.category.rawValue == row.category)
        #expect(me.certificate.serialHex == row.serial)
        let offered = Generations.offeredByDefault(all).contains { $0.label == me.label }
        #expect(offered == (row.offered == "yes"), "\(id)")
    }

    @Test func tiesAreAllKept() throws {
        let devices = Generations.select(try Fixture.shareIdentities(), filter: .device)
        #expect(devices.map(\.displayName) == ["device_048F.p12", "device_5A.p12"])
        #expect(Set(devices.map(\.certificate.notBefore)).count == 1)
    }

    @Test func everyEncryptionGenerationIsKept() throws {
        let enc = Generations.select(try Fixture.shareIdentities(), filter: .encryption)
        #expect(enc.count == 3)
        #expect(Set(enc.map(\.certificate.notBefore)).count == 3)
    }

    @Test func olderGenerationsOnlyUnderNoFilter() throws {
        let all = try Fixture.shareIdentities()
        for f in ShareFilter.allCases where f != .noFilter {
            let names = Generations.select(all, filter: f).map(\.displayName)
            #expect(!names.contains("signature_38AF.p12") && !names.contains("piv_7FFFFFFF0001.p12")
                    && !names.contains("device_01F4A3.p12"), "\(f)")
        }
        let unfiltered = Generations.select(all, filter: .noFilter).map(\.displayName)
        #expect(unfiltered.count == 11)
        #expect(unfiltered.contains("device_01F4A3.p12"))  // EC, older generation
    }

    @Test func unknownOnlyUnderNoFilter() throws {
        let all = try Fixture.shareIdentities()
        for f in ShareFilter.allCases {
            let hasUnknown = Generations.select(all, filter: f).contains { $0.category == .unknown }
            #expect(hasUnknown == (f == .noFilter), "\(f)")
        }
        #expect(!ShareSelector.folder(.all).accepts(.unknown))
        #expect(ShareSelector.pkcs12.accepts(.unknown))
    }

    /// A newer generation hides the older one; a single identity is its own newest.
    @Test func newestWinsWithinAType() throws {
        let all = try Fixture.shareIdentities()
        let sigs = all.filter { $0.category == .signature }
        #expect(Generations.offeredByDefault(sigs).map(\.displayName) == ["signature_01.p12"])
        let old = sigs.filter { $0.displayName == "signature_38AF.p12" }
        #expect(Generations.offeredByDefault(old).count == 1)
        #expect(Generations.offeredByDefault([]).isEmpty)
    }

    @Test func acceptanceTable() {
        let table: [(ShareFilter, Set<CertificateCategory>)] = [
            (.all, [.device, .signature, .encryption, .authentication]),
            (.allUser, [.signature, .encryption, .authentication]),
            (.device, [.device]), (.signature, [.signature]), (.encryption, [.encryption]),
            (.authentication, [.authentication]), (.noFilter, Set(CertificateCategory.allCases)),
        ]
        for (filter, accepted) in table {
            for c in CertificateCategory.allCases {
                #expect(filter.accepts(c) == accepted.contains(c), "\(filter) \(c)")
            }
        }
    }
}
