import Foundation
import Testing
import KeyshareCrypto

/// MAC contexts are copies of a per-process template keyed at creation
/// (HMAC.swift, MACTemplates; issue 13). Each is checked here against HMAC
/// computed from its definition (RFC 2104) over the plain digest, for every
/// digest, key lengths around the block size, keys alternating between
/// contexts (a template must never carry a key), and many threads at once.
struct MACTemplateTests {
    static func blockSize(_ d: DigestAlgorithm) -> Int {
        switch d {
        case .sha1, .sha224, .sha256: 64
        case .sha384, .sha512, .sha512_224, .sha512_256: 128
        case .sha3_224: 144
        case .sha3_256: 136
        case .sha3_384: 104
        case .sha3_512: 72
        }
    }

    /// RFC 2104: H((K' ^ opad) || H((K' ^ ipad) || m)), K' the key (hashed when longer than a block) padded with zeros.
    static func reference(_ d: DigestAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        let b = blockSize(d)
        var k = key.count > b ? d.hash(key) : key
        k += [UInt8](repeating: 0, count: b - k.count)
        let inner = d.hash(k.map { $0 ^ 0x36 } + data)
        return d.hash(k.map { $0 ^ 0x5c } + inner)
    }

    @Test(arguments: DigestAlgorithm.allCases)
    func hmacMatchesTheDefinition(_ d: DigestAlgorithm) throws {
        let data = Array("what do ya want for nothing?".utf8)
        let b = Self.blockSize(d)
        for n in [0, 1, 4, 20, b - 1, b, b + 1, 2 * b + 3] {
            let key = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            let ctx = try MACContext(d, key: key)
            try ctx.update(data)
            #expect(try ctx.finish() == Self.reference(d, key: key, data: data), "\(d) key of \(n) bytes")
            #expect(try HMAC.mac(d, key: key, data: data) == Self.reference(d, key: key, data: data))
        }
    }

    @Test func contextsKeyedOneAfterAnotherKeepTheirOwnKeys() throws {
        let a: [UInt8] = Array(repeating: 0xaa, count: 32), b: [UInt8] = Array(repeating: 0x0b, count: 20)
        let m: [UInt8] = [1, 2, 3]
        let ca = try MACContext(.sha256, key: a)
        let cb = try MACContext(.sha256, key: b)
        let ce = try MACContext(.sha256, key: [])
        try ca.update(m); try cb.update(m); try ce.update(m)
        #expect(try ca.finish() == Self.reference(.sha256, key: a, data: m))
        #expect(try cb.finish() == Self.reference(.sha256, key: b, data: m))
        #expect(try ce.finish() == Self.reference(.sha256, key: [], data: m))
    }

    @Test func manyThreadsShareTheTemplates() throws {
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<200 {
                let d = DigestAlgorithm.allCases[(t + i) % DigestAlgorithm.allCases.count]
                let key = [UInt8(t), UInt8(truncatingIfNeeded: i)]
                let m = [UInt8(truncatingIfNeeded: i)]
                let got = try? HMAC.mac(d, key: key, data: m)
                if got != Self.reference(d, key: key, data: m) { failures.add() }
            }
        }
        #expect(failures.count == 0)
    }
}

private final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.lock(); n += 1; lock.unlock() }
    var count: Int { lock.lock(); defer { lock.unlock() }; return n }
}
