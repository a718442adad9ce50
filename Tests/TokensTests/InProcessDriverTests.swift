import Foundation
import KeychainTestSupport
import Testing
@testable import Keychain
import KeyshareCrypto
@testable import Tokens

/// The watcher polling a real module (SoftHSM2) inside this process: a card
/// initialised (pkcs11-tool) and deleted (softhsm2-util) by another process is
/// seen, although SoftHSM2 reads its token list only at C_Initialize.
@Suite struct InProcessDriverTests {
    static let module = "/usr/lib/softhsm/libsofthsm2.so"
    static let util = "/usr/bin/softhsm2-util"
    static let tool = "/usr/bin/pkcs11-tool"

    /// Runs a program; the SO PIN goes in its environment, as pkcs11-tool's
    /// `--so-pin env:VAR` reads it: argv is readable by every local user
    /// (softhsm2-util takes PINs only as arguments, so it does not initialise).
    static func run(_ executable: String, _ args: [String], environment: [String: String] = [:]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = args
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
    }

    @Test(.enabled(if: [module, util, tool].allSatisfy { FileManager.default.fileExists(atPath: $0) }))
    func watcherSeesSoftHSMCardsComeAndGo() throws {
        let home = TempHome()
        let dir = (home.path as NSString).deletingLastPathComponent + "/hsm"
        try FileManager.default.createDirectory(atPath: dir + "/tokens", withIntermediateDirectories: true)
        let conf = dir + "/softhsm2.conf"
        try "directories.tokendir = \(dir)/tokens\nobjectstore.backend = file\nlog.level = ERROR\n".write(toFile: conf, atomically: true, encoding: .utf8)
        // Only stored with the driver (defect 9b): this process's own
        // environment does not have it, and the in-process load applies it.
        unsetenv("SOFTHSM2_CONF")
        let store = try home.store()
        try store.addDriver(name: "softhsm2", modulePath: Self.module, environment: ["SOFTHSM2_CONF": conf])
        let w = TokenWatcher(store: store, interval: 0.05, drivers: DriverPoller(store: store, isolation: .inProcess), driverInterval: 0.1)
        let rec = Recorder()
        w.setInsertionHandler { [weak w] id in
            rec.add("inserted \(id)")
            w?.addRemovalHandler({ rec.add("removed \($0)") }, forTokenID: id)
        }
        w.start()
        defer { w.stop() }
        func waitFor(_ prefix: String) -> Bool {
            for _ in 0..<150 where !rec.all.contains(where: { $0.hasPrefix(prefix) }) { usleep(20_000) }
            return rec.all.contains { $0.hasPrefix(prefix) }
        }
        // A fresh token directory: SoftHSM2's only slot is the free one (index 0).
        try Self.run(Self.tool, ["--module", Self.module, "--slot-index", "0", "--init-token", "--label", "unit",
                                 "--so-pin", "env:UNIT_SO_PIN"], environment: ["UNIT_SO_PIN": "2222", "SOFTHSM2_CONF": conf])
        #expect(waitFor("inserted pkcs11.softhsm2:"))
        try Self.run(Self.util, ["--delete-token", "--token", "unit"], environment: ["SOFTHSM2_CONF": conf])
        #expect(waitFor("removed pkcs11.softhsm2:"))
        #expect(rec.all.count == 2)
    }
}
