/// The CLI's entry point in the engine (libkeyshare-engine.so): /usr/bin/keyshare is a small C
/// launcher (Sources/Launcher) that loads the engine and calls this, so the engine is installed
/// once for the CLI, the agent and the module's in-process mode. The _v suffix is the launcher's
/// ABI. argv is the process's own: the Swift runtime captured it when the engine was loaded
/// (CommandLine), so the arguments are not read from here.
@_cdecl("keyshare_main_v1")
public func keyshareMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    Keyshare.main()
    return 0
}
