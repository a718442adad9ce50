import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto

/// The store side of fork safety (ForkSafety.swift): a connection closed for
/// a fork leaves the WAL in place, reopens on the next use with the same
/// settings and the lock-free change counter; and the fork gate.
@Suite struct ForkSafetyTests {
    @Test func suspendedConnectionReopensWithItsSettings() throws {
        let home = TempHome()
        let store = try home.store()
        let other = try home.store()
        let token = try makeToken(store)
        let ref = try store.add(token: token, itemClass: .data, attributes: [CKA.label: [1]], key: nil)
        let before = try store.changeCounter()
        #expect(store.changeCounterIsLockFree)

        store.suspendConnection()
        #expect(!store.connectionIsOpen)
        #expect(!store.changeCounterIsLockFree)
        // No checkpoint and no WAL deletion on that close.
        #expect(FileManager.default.fileExists(atPath: home.path + "/keychain.db-wal"))

        // Another process's (here: connection's) commit while closed is seen after the reopen.
        try other.update(ref, attributes: [CKA.label: [2]], key: nil)
        #expect(try store.item(ref, key: nil).attributes[CKA.label] == [2])
        #expect(store.connectionIsOpen)
        #expect(store.changeCounterIsLockFree)
        #expect(try store.changeCounter() != before)

        // The per-connection settings were applied again.
        let settings = try store.read {
            try store.db.query("SELECT * FROM pragma_synchronous, pragma_foreign_keys, pragma_secure_delete, pragma_temp_store, pragma_journal_mode") {
                [$0.int(0), $0.int(1), $0.int(2), $0.int(3)].map(String.init) + [$0.text(4)]
            }.first
        }
        #expect(settings == ["2", "1", "1", "2", "wal"])

        // Writes work and stay durable across another suspend.
        let ref2 = try store.add(token: token, itemClass: .data, attributes: [CKA.label: [3]], key: nil)
        store.suspendConnection()
        #expect(try other.item(ref2, key: nil).attributes[CKA.label] == [3])
        #expect(try store.item(ref2, key: nil).attributes[CKA.label] == [3])
    }

    /// The first change counter after a reopen comes from PRAGMA data_version
    /// (the WAL index is not mapped yet), whose values are per connection:
    /// two reopened connections must not give equal counters, or a view
    /// cached under one could pass as current under the other.
    @Test func fallbackCountersOfReopenedConnectionsDiffer() throws {
        let home = TempHome()
        let store = try home.store()
        _ = try makeToken(store)
        store.suspendConnection()
        let first = try store.changeCounter()
        store.suspendConnection()
        let second = try store.changeCounter()
        #expect(first & 1 == 0 && second & 1 == 0, "both from the PRAGMA fallback")
        #expect(first != second)
    }

    /// The gate waits for the threads inside, holds new ones back, and lets a
    /// thread's nested and `outside` calls through without deadlock.
    @Test func gateWaitsForThreadsInsideAndHoldsNewOnes() throws {
        let log = Events()
        ForkGate.enter()
        ForkGate.enter()  // nested: no wait, counted once
        ForkGate.leave()
        let forker = Thread {
            let quiesced = ForkGate.closeForFork()
            log.add("closed \(quiesced)")
            usleep(50_000)
            log.add("reopen")
            ForkGate.reopenAfterFork()
        }
        forker.start()
        usleep(100_000)
        #expect(log.all.isEmpty, "the fork must wait while a thread is inside")
        let entrant = Thread {
            ForkGate.enter()
            log.add("entered")
            ForkGate.leave()
        }
        entrant.start()
        usleep(50_000)
        #expect(log.all.isEmpty)
        ForkGate.leave()
        for _ in 0..<200 where log.all.count < 3 { usleep(10_000) }
        #expect(log.all == ["closed true", "reopen", "entered"])

        // `outside` lets a fork through while this thread waits.
        ForkGate.enter()
        let done = Events()
        let forker2 = Thread {
            done.add("closed \(ForkGate.closeForFork())")
            ForkGate.reopenAfterFork()
        }
        ForkGate.outside {
            forker2.start()
            for _ in 0..<200 where done.all.isEmpty { usleep(10_000) }
        }
        ForkGate.leave()
        #expect(done.all == ["closed true"])
        #expect(!ForkGate.isInside)
    }
}

private final class Events: @unchecked Sendable {
    private let lock = Lock()
    private var items: [String] = []
    func add(_ s: String) { lock.withLock { items.append(s) } }
    var all: [String] { lock.withLock { items } }
}
