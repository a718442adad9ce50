import Foundation
import KeyshareAgent
import Testing

/// Replays the control fuzzer's kept corpus and crash reproducers (Tests/fuzz/corpus/control,
/// Tests/fuzz/crashes/control-*) through ControlProtocol.fuzzDecode, the libFuzzer harness's
/// own call (Tests/fuzz/swift/Fuzz.swift): the agent's decoder of the CLI's control requests,
/// with its round trip checked, so a regression on any input the fuzzer once found shows up
/// in `make test` without a sanitizer build. Passing = returning without a trap.
@Suite struct ControlCorpusTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fuzz")

    static func inputs() -> [[UInt8]] {
        let fm = FileManager.default
        var urls = (try? fm.contentsOfDirectory(at: fuzz.appendingPathComponent("corpus/control"), includingPropertiesForKeys: nil)) ?? []
        urls += ((try? fm.contentsOfDirectory(at: fuzz.appendingPathComponent("crashes"), includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.lastPathComponent.hasPrefix("control-") }
        return urls.compactMap { try? [UInt8](Data(contentsOf: $0)) }
    }

    @Test func controlCorpus() {
        let all = Self.inputs()
        #expect(all.count >= 10, "the control corpus is there")
        let decoded = all.filter { ControlProtocol.fuzzDecode($0) }.count
        #expect(decoded > 0, "some corpus inputs are well-formed requests")
    }

    /// The decoder's edges by hand: a request with fields, truncated at every byte, with a
    /// byte too many, with 65 fields, with a 65-byte key.
    @Test func decoderEdges() {
        func request(_ fields: [([UInt8], [UInt8])], count: UInt32? = nil) -> [UInt8] {
            func u32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xff) } }
            var b: [UInt8] = u32(ControlProtocol.magic) + [1, 0, 3, 0] + u32(count ?? UInt32(fields.count))
            for (k, v) in fields { b += u32(UInt32(k.count)) + k + u32(UInt32(v.count)) + v }
            return b
        }
        let good = request([(Array("pin".utf8), Array("1234".utf8)), (Array("label".utf8), [])])
        #expect(ControlProtocol.fuzzDecode(good))
        for n in 0..<good.count { #expect(!ControlProtocol.fuzzDecode(Array(good[0..<n])), "cut to \(n) bytes") }
        #expect(!ControlProtocol.fuzzDecode(good + [0]))
        #expect(ControlProtocol.fuzzDecode(request((0..<64).map { (Array("k\($0)".utf8), [UInt8($0)]) })))
        #expect(!ControlProtocol.fuzzDecode(request((0..<65).map { (Array("k\($0)".utf8), [UInt8($0)]) })))
        #expect(ControlProtocol.fuzzDecode(request([([UInt8](repeating: 0x6b, count: 64), [1])])))
        #expect(!ControlProtocol.fuzzDecode(request([([UInt8](repeating: 0x6b, count: 65), [1])])))
        // Keys that are not UTF-8 (repaired to longer strings) and a key given twice.
        #expect(ControlProtocol.fuzzDecode(request([([UInt8](repeating: 0xff, count: 64), [1]), ([0xc3], [2])])))
        #expect(ControlProtocol.fuzzDecode(request([(Array("a".utf8), [1]), (Array("a".utf8), [2])])))
        // A value length past the frame (bytes 17..<21: after the header, the key's length and the key).
        var lying = request([(Array("a".utf8), [1])])
        lying.replaceSubrange(17..<21, with: [0xff, 0xff, 0xff, 0xff])
        #expect(!ControlProtocol.fuzzDecode(lying))
    }
}
