import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto
@testable import Tokens

/// Collects handler calls from the watcher's threads.
final class Recorder: @unchecked Sendable {
    private let lock = Lock()
    private var lines: [String] = []
    func add(_ s: String) { lock.withLock { lines.append(s) } }
    var all: [String] { lock.withLock { lines } }
}

@Suite struct WatcherTests {
    let a = TokenID("com.keyshare.soft:AAAA")!
    let b = TokenID("pkcs11.softhsm2:bbbb")!

    @Test func trackerListsPresentTokensFirstThenChanges() {
        var t = PresenceTracker()
        #expect(t.update([a: (true, 1), b: (false, 2)]) == [.inserted(a)])
        #expect(t.update([a: (false, 2), b: (true, 3)]) == [.removed(a), .inserted(b)])
        #expect(t.update([a: (false, 2), b: (true, 3)]) == [])
        #expect(t.present == [b])
    }

    /// A remove+insert (or several) between two polls is not lost.
    @Test func trackerReplaysTransitionsBetweenPolls() {
        var t = PresenceTracker()
        _ = t.update([a: (true, 1)])
        #expect(t.update([a: (true, 3)]) == [.removed(a), .inserted(a)])
        #expect(t.update([a: (true, 7)]) == [.removed(a), .inserted(a), .removed(a), .inserted(a)])
        #expect(t.update([a: (false, 8)]) == [.removed(a)])
        // Deleted: gone from the state altogether.
        #expect(t.update([:]) == [])
        // A token made before generations existed (generation 0) still flips.
        #expect(t.update([b: (true, 0)]) == [.inserted(b)])
        #expect(t.update([b: (false, 0)]) == [.removed(b)])
    }

    @Test func watcherSeesSoftTokensOfTheStore() throws {
        let home = TempHome()
        let store = try home.store()
        let m = TokenManager(store: store)
        let t1 = try m.createSoftToken(label: "One", soPIN: soPIN, userPIN: userPIN)
        let w = TokenWatcher(store: store, interval: 0.05)
        let rec = Recorder()
        w.setInsertionHandler { [weak w] id in
            rec.add("inserted \(id)")
            w?.addRemovalHandler({ rec.add("removed \($0)") }, forTokenID: id)
        }
        #expect(rec.all == ["inserted \(t1.tokenID)"])
        #expect(w.tokenIDs == [t1.tokenID])
        // Another store connection plays "another process".
        let other = try home.store()
        try TokenManager(store: other).removeToken(t1.tokenID)
        try TokenManager(store: other).insertToken(t1.tokenID)
        try TokenManager(store: other).removeToken(t1.tokenID)
        let t2 = try TokenManager(store: other).createSoftToken(label: "Two", soPIN: soPIN, userPIN: userPIN)
        try w.poll()
        // Per token, in order; tokens changed within one poll come in token ID order.
        #expect(rec.all.filter { $0.hasSuffix(t1.tokenID.description) }
                == ["inserted \(t1.tokenID)", "removed \(t1.tokenID)", "inserted \(t1.tokenID)", "removed \(t1.tokenID)"])
        #expect(rec.all.filter { $0.hasSuffix(t2.tokenID.description) } == ["inserted \(t2.tokenID)"])
        #expect(rec.all.count == 5)
        try other.deleteToken(t2.tokenID)
        try w.poll()
        #expect(rec.all.last == "removed \(t2.tokenID)")
        #expect(w.tokenIDs.isEmpty)
    }

    @Test func backgroundPollingDeliversWithinAnInterval() throws {
        let home = TempHome()
        let store = try home.store()
        let w = TokenWatcher(store: store, interval: 0.05)
        let rec = Recorder()
        w.setInsertionHandler { rec.add("inserted \($0)") }
        w.start()
        defer { w.stop() }
        let t = try TokenManager(store: try home.store()).createSoftToken(label: "Late", soPIN: soPIN, userPIN: userPIN)
        var waited = 0
        while rec.all.isEmpty && waited < 100 { usleep(20_000); waited += 1 }
        #expect(rec.all == ["inserted \(t.tokenID)"])
        #expect(waited < 25)  // well under 0.5 s
    }

    @Test func removalHidesItemsAndInsertionRestoresTheSameReferences() throws {
        let env = try Env()
        let pem = try Fixture.text("identities/auth-upn-old.cert.pem")
        let r = try env.manager.importCertificate(try Certificate(pem: pem), into: env.token.tokenID, key: nil)
        let ref = try #require(r.certificate)
        try env.manager.removeToken(env.token.tokenID)
        #expect(throws: KeychainError.itemNotFound) { _ = try env.store.item(ref, key: nil) }
        #expect(try env.store.owningToken(ref)?.present == false)
        #expect(try env.store.token(env.token.tokenID)?.slotID == env.token.slotID)
        try env.manager.insertToken(env.token.tokenID)
        #expect(try env.store.item(ref, key: nil).reference == ref)
        #expect(throws: TokensError.notSoftToken(b.description)) { try env.manager.removeToken(b) }
    }
}
