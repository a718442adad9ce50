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

    /// The records keyshare writes are byte for byte those ZIPFoundation 0.9.20 wrote
    /// (issue 28 replaced it with ShareZip's own writer over zlib): the same two entries
    /// at 2026-01-02 03:04:06 UTC, as ZIPFoundation's Archive.addEntry(... .none) made them.
    @Test func bytesAsZIPFoundationWroteThem() throws {
        let zipFoundation = "504b03041400000800008318225c1d80bc55030000000300000008000000615f30312e703132010203504b0304140000"
            + "0800008318225c5506bf3d050000000500000005000000622e7031320707070707504b010215031400000800008318225c"
            + "1d80bc550300000003000000080000000000000000000000808100000000615f30312e703132504b01021503140000"
            + "0800008318225c5506bf3d0500000005000000050000000000000000000000808129000000622e703132504b05060000"
            + "00000200020069000000510000000000"
        let zip = try ShareZip.build([("a_01.p12", [1, 2, 3]), ("b.p12", [7, 7, 7, 7, 7])],
                                     date: Date(timeIntervalSince1970: 1_767_323_046))
        #expect(Self.hex(zip) == zipFoundation)
    }

    /// Deflated entries (zip(1)'s default) inflate through zlib; the fixture's are PKCS #12 (DER SEQUENCE).
    @Test func deflatedEntriesInflate() throws {
        let entries = try ShareZip.entries(of: Fixture.bytes("zips/purebred-share.zip"))
        #expect(entries.count == 3)
        #expect(entries.allSatisfy { $0.bytes.count > 1000 && $0.bytes.first == 0x30 })
    }

    /// Hostile archives: a wrong CRC, a cut archive, an entry that inflates past the bound
    /// while its header claims 10 bytes, an unknown method: each refused with a ZipError.
    @Test func hostileArchivesRefused() throws {
        var zip = try ShareZip.build([("a.p12", [1, 2, 3, 4])], date: Date())
        zip[30 + 5] ^= 0xFF  // the entry's first byte, after the 30-byte header and the 5-byte name
        #expect(throws: ShareZip.ZipError.self) { try ShareZip.entries(of: zip) }

        let whole = try ShareZip.build([("a.p12", [1, 2, 3, 4])], date: Date())
        for cut in [1, 10, 22, 40] {
            #expect(throws: ShareZip.ZipError.self) { try ShareZip.entries(of: Array(whole.prefix(whole.count - cut))) }
        }

        // 1 MiB + 4 KiB of zeros, raw deflate (zlib level 9): past maxEntrySize.
        let bomb = Self.bytes("edc18100000000c3a0f953dfe0045501") + [UInt8](repeating: 0, count: 1019) + [0x7C, 0x03]
        let error = #expect(throws: ShareZip.ZipError.self) {
            try ShareZip.entries(of: Self.oneEntryZip(name: "bomb.p12", method: 8, data: bomb, size: 10, crc: 0))
        }
        #expect(error.map { "\($0)" }?.contains("inflates past") == true)

        #expect(throws: ShareZip.ZipError.self) {
            try ShareZip.entries(of: Self.oneEntryZip(name: "x.p12", method: 14, data: [1, 2], size: 2, crc: 0))
        }
    }

    static func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var it = hex.makeIterator()
        while let h = it.next(), let l = it.next() { out.append(UInt8(String([h, l]), radix: 16)!) }
        return out
    }

    /// A one-entry archive with the given method, sizes and CRC (no checks: for hostile input).
    static func oneEntryZip(name: String, method: UInt16, data: [UInt8], size: UInt32, crc: UInt32) -> [UInt8] {
        func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func le32(_ v: UInt32) -> [UInt8] { le16(UInt16(v & 0xFFFF)) + le16(UInt16(v >> 16)) }
        let n = Array(name.utf8)
        let local = le32(0x0403_4B50) + le16(20) + le16(0) + le16(method) + le16(0) + le16(0x21)
            + le32(crc) + le32(UInt32(data.count)) + le32(size) + le16(UInt16(n.count)) + le16(0) + n + data
        let central = le32(0x0201_4B50) + le16(0x0315) + le16(20) + le16(0) + le16(method) + le16(0) + le16(0x21)
            + le32(crc) + le32(UInt32(data.count)) + le32(size) + le16(UInt16(n.count)) + le16(0) + le16(0)
            + le16(0) + le16(0) + le32(0o100600 << 16) + le32(0) + n
        return local + central + le32(0x0605_4B50) + le16(0) + le16(0) + le16(1) + le16(1)
            + le32(UInt32(central.count)) + le32(UInt32(local.count)) + le16(0)
    }
}
