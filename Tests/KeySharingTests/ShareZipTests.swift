import Foundation
import Testing
@testable import KeySharing

@Suite struct ShareZipTests {
    @Test func roundTrip() throws {
        let entries: [(name: String, bytes: [UInt8])] = [("a_01.p12", [1, 2, 3]), ("b_02.p12", Array(repeating: 7, count: 70_000))]
        let zip = try ShareZip.build(entries, date: Date())
        #expect(ShareZip.looksLikeZip(zip))
        let back = try ShareZip.entries(of: zip)
        #expect(back.map(\.name) == ["a_01.p12", "b_02.p12"])
        #expect(back.map(\.bytes) == entries.map(\.bytes))
    }

    @Test func emptyZipAndNotAZip() throws {
        let empty = try ShareZip.build([], date: Date())
        #expect(ShareZip.looksLikeZip(empty))
        #expect(try ShareZip.entries(of: empty).isEmpty)
        #expect(throws: ShareZip.ZipError.self) { try ShareZip.entries(of: Array("not a zip".utf8)) }
        #expect(!ShareZip.looksLikeZip([0x30, 0x82]))
    }

    @Test func fixtureZipOfTheReference() throws {
        let entries = try ShareZip.entries(of: Fixture.bytes("zips/purebred-share.zip"))
        #expect(entries.map(\.name) == ["signature_01.p12", "piv_8E2F55A1.p12", "encryption_6E.p12"])
    }

    @Test func oversizedEntryRefused() throws {
        let big = try ShareZip.build([("big.p12", Array(repeating: 0, count: ShareZip.maxEntrySize + 1))], date: Date())
        #expect(throws: ShareZip.ZipError.self) { try ShareZip.entries(of: big) }
    }
}
