#if canImport(Glibc)
import Glibc
#endif
import CPKCS11

/// The KEYSHARE_DEBUG call log. The environment is read once, on first use,
/// so a disabled log costs one load of a constant per call. Callers pass only
/// handles, mechanism numbers and flags: never a PIN, key or data buffer.
public enum Log {
    /// Where log lines go, or -1 when logging is off.
    private static let fd: Int32 = {
        guard let v = getenv("KEYSHARE_DEBUG"), let s = String(validatingCString: v), !s.isEmpty, s != "0" else {
            return -1
        }
        if let p = getenv("KEYSHARE_LOG"), let path = String(validatingCString: p), !path.isEmpty {
            let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            if fd >= 0 { return fd }
        }
        return STDERR_FILENO
    }()

    public static var enabled: Bool { fd >= 0 }

    /// Monotonic nanoseconds, for call durations.
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    public static func call(_ function: StaticString, _ details: String, rv: CK_RV, started: UInt64) {
        guard fd >= 0 else { return }
        let micros = (now() &- started) / 1000
        let ms = "\(micros / 1000).\(String(micros % 1000 + 1000).dropFirst())"
        line("\(function)(\(details)) = \(ReturnValue.name(rv)) \(ms) ms")
    }

    public static func message(_ text: String) {
        guard fd >= 0 else { return }
        line(text)
    }

    /// One write(2) per line, so lines of concurrent threads and processes
    /// sharing a log file do not interleave.
    private static func line(_ text: String) {
        var s = "keyshare[\(getpid())] \(text)\n"
        s.withUTF8 { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n <= 0 { break }
                off += n
            }
        }
    }
}
