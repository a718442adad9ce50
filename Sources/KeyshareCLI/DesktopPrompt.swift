import FoundationEssentials
import Glibc
import KeyshareAgent

/// A `keyshare` command on a desktop with no terminal (started from a
/// launcher, a file manager, a desktop entry): the PIN is asked through the
/// same pinentry the agent uses (docs/agent.md, "The agent's prompt"), on this
/// process's own display. nil: no display or no pinentry (the caller then
/// says to give a source option).
enum DesktopPrompt {
    static let displayVariables = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_SESSION_TYPE", "XDG_RUNTIME_DIR",
                                   "DBUS_SESSION_BUS_ADDRESS", "LANG"]

    static func ask(_ prompt: String) throws -> [UInt8]? {
        let env = ProcessInfo.processInfo.environment
        var display = ClientDisplay()
        for name in displayVariables { if let v = env[name], !v.isEmpty { display.variables[name] = v } }
        let place = PromptPlace(display: display)
        guard place.reachable, let settings = PinentrySettings.fromEnvironment().settings else { return nil }
        let what = prompt.trimming(charactersIn: ": ")
        var texts = Pinentry.Texts(title: "keyshare", description: "keyshare (pid \(getpid()), no terminal) asks for the \(what.prefix(1).lowercased() + what.dropFirst()).")
        texts.prompt = "PIN:"
        switch Pinentry.getPIN(settings, place, texts) {
        case .success(let pin): return pin
        case .failure(.canceled): throw CLIError("\(what): cancelled at the prompt")
        case .failure(.timedOut): throw CLIError("\(what): no answer at the prompt within \(settings.timeout) s")
        case .failure(let f): throw CLIError("\(what): the prompt (\(settings.program)) failed: \(f)")
        }
    }
}
