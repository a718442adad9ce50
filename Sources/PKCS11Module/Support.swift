import CPKCS11
import CPKCS11ABI
import Keychain
import PKCS11

// The C side of every entry point: argument decoding, error mapping, the
// output-buffer convention and the debug log. Nothing here trusts a C input:
// no force unwraps, no preconditions, lengths checked before conversion.

/// Runs one entry point: the body's CK_RV, or the thrown error's; logged when
/// KEYSHARE_DEBUG is set (the details closure is not evaluated otherwise).
/// The whole call holds the fork gate's shared side (Keychain.ForkGate): a
/// fork waits until no thread is in here, and calls wait while it is prepared.
@inline(__always)
func entry(_ name: StaticString, _ details: @autoclosure () -> String = "", _ body: () throws -> CK_RV) -> CK_RV {
    ForkGate.enter()
    defer { ForkGate.leave() }
    guard Log.enabled else {
        do { return try body() } catch { return returnValue(for: error) }
    }
    let started = Log.now()
    let rv: CK_RV
    do { rv = try body() } catch { rv = returnValue(for: error) }
    Log.call(name, details(), rv: rv, started: started)
    return rv
}

/// The live runtime (CKR_CRYPTOKI_NOT_INITIALIZED before C_Initialize).
@inline(__always)
func runtime() throws -> Runtime { try Module.current.runtime() }

/// A CK_ULONG length as an Int, refusing values no buffer can have.
func length(_ n: CK_ULONG) throws -> Int {
    guard let i = Int(exactly: n), i <= Int(Int32.max) else { throw PKCS11Error.argumentsBad }
    return i
}

/// Input bytes: nil when the pointer is NULL with a non-zero length (the
/// semantics layer turns that into CKR_ARGUMENTS_BAD inside the operation,
/// so the operation ends as the spec requires).
func input(_ p: UnsafePointer<CK_BYTE>?, _ n: CK_ULONG) throws -> [UInt8]? {
    let count = try length(n)
    if count == 0 { return [] }
    guard let p else { return nil }
    return Array(UnsafeBufferPointer(start: p, count: count))
}

/// Input bytes in place, for the copy-free cipher path (`Runtime.cipherDirect`):
/// nil for a NULL pointer with a non-zero length, as `input`.
func rawInput(_ p: UnsafePointer<CK_BYTE>?, _ n: CK_ULONG) throws -> UnsafeRawBufferPointer? {
    let count = try length(n)
    if count == 0 { return UnsafeRawBufferPointer(start: nil, count: 0) }
    guard let p else { return nil }
    return UnsafeRawBufferPointer(start: p, count: count)
}

/// The buffer convention for a direct cipher call: the length is set in
/// every case; the bytes are already in place.
func deliverDirect(_ result: DirectOutput, _ pulLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    guard let pulLen else { return CKR_ARGUMENTS_BAD }
    switch result {
    case .length(let n):
        pulLen.pointee = CK_ULONG(n)
        return CKR_OK
    case .tooSmall(let n):
        pulLen.pointee = CK_ULONG(n)
        return CKR_BUFFER_TOO_SMALL
    case .written(let n):
        pulLen.pointee = CK_ULONG(n)
        return CKR_OK
    }
}

/// Input bytes that must be there (PINs, labels): NULL is CKR_ARGUMENTS_BAD.
func required(_ p: UnsafePointer<CK_BYTE>?, _ n: CK_ULONG) throws -> [UInt8] {
    guard let bytes = try input(p, n) else { throw PKCS11Error.argumentsBad }
    return bytes
}

/// The capacity of an output buffer: nil for a NULL buffer (length query).
func capacity(_ p: UnsafeMutablePointer<CK_BYTE>?, _ pulLen: UnsafeMutablePointer<CK_ULONG>?) throws -> Int? {
    guard let pulLen else { throw PKCS11Error.argumentsBad }
    guard p != nil else { return nil }
    return Int(exactly: pulLen.pointee) ?? Int.max
}

/// The output-buffer convention (PKCS #11 §5.2): NULL buffer: set the length,
/// CKR_OK; short buffer: set the length, CKR_BUFFER_TOO_SMALL; else copy and
/// set the length actually written.
func deliver(_ result: OutputResult, _ p: UnsafeMutablePointer<CK_BYTE>?, _ pulLen: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    guard let pulLen else { return CKR_ARGUMENTS_BAD }
    switch result {
    case .length(let n):
        pulLen.pointee = CK_ULONG(n)
        return CKR_OK
    case .tooSmall(let n):
        pulLen.pointee = CK_ULONG(n)
        return CKR_BUFFER_TOO_SMALL
    case .bytes(let bytes):
        if !bytes.isEmpty {
            guard let p else { return CKR_ARGUMENTS_BAD }
            bytes.withUnsafeBufferPointer { b in
                if let base = b.baseAddress { p.update(from: base, count: b.count) }
            }
        }
        pulLen.pointee = CK_ULONG(bytes.count)
        return CKR_OK
    }
}

/// A list answer with the same convention (slot lists, mechanism lists).
func deliverList<T>(_ items: [T], _ p: UnsafeMutablePointer<T>?, _ pulCount: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    guard let pulCount else { return CKR_ARGUMENTS_BAD }
    guard let p else {
        pulCount.pointee = CK_ULONG(items.count)
        return CKR_OK
    }
    guard pulCount.pointee >= CK_ULONG(items.count) else {
        pulCount.pointee = CK_ULONG(items.count)
        return CKR_BUFFER_TOO_SMALL
    }
    for (i, item) in items.enumerated() { p[i] = item }
    pulCount.pointee = CK_ULONG(items.count)
    return CKR_OK
}

/// A caller's template with its values copied (the caller's memory is
/// valid only during the call).
func template(_ p: UnsafeMutablePointer<CK_ATTRIBUTE>?, _ n: CK_ULONG) throws -> Template {
    let count = try length(n)
    if count == 0 { return [] }
    guard let p else { throw PKCS11Error.argumentsBad }
    var out: Template = []
    out.reserveCapacity(count)
    for i in 0..<count {
        let a = p[i]
        let len = try length(a.ulValueLen)
        if len == 0 {
            out.append(Attribute(a.type, []))
            continue
        }
        guard let v = a.pValue else { throw PKCS11Error.argumentsBad }
        if TemplateAttributes.isTemplateType(a.type) {
            // CKA_WRAP/UNWRAP/DERIVE_TEMPLATE: an array of CK_ATTRIBUTE, read now.
            out.append(Attribute(a.type, try TemplateAttributes.embedded(v, a.ulValueLen)))
            continue
        }
        out.append(Attribute(a.type, Array(UnsafeRawBufferPointer(start: v, count: len))))
    }
    return out
}

/// pMechanism decoded into a `Mechanism` while its parameter is valid.
func mechanism(_ p: UnsafeMutablePointer<CK_MECHANISM>?) throws -> Mechanism {
    guard let m = p?.pointee else { throw PKCS11Error.argumentsBad }
    let len = try length(m.ulParameterLen)
    if len == 0 { return try Mechanism(type: m.mechanism, parameter: nil) }
    guard let param = m.pParameter else { throw PKCS11Error.argumentsBad }
    return try Mechanism(type: m.mechanism, parameter: UnsafeRawBufferPointer(start: param, count: len))
}

func mechanismName(_ p: UnsafeMutablePointer<CK_MECHANISM>?) -> String {
    guard let m = p?.pointee else { return "NULL" }
    return "0x" + String(m.mechanism, radix: 16)
}

/// Copies a blank-padded string into a fixed char array of a C struct (tuples in Swift).
func fill<T>(_ field: inout T, _ text: String) {
    withUnsafeMutableBytes(of: &field) { buf in
        let bytes = padded(text, buf.count)
        buf.copyBytes(from: bytes)
    }
}

func version(_ v: (major: UInt8, minor: UInt8)) -> CK_VERSION {
    CK_VERSION(major: v.major, minor: v.minor)
}

// The pthread_atfork handlers, registered by pkcs11/abi/fork_handlers.c when
// the library is loaded (before any thread can be inside the module).

@c @implementation
public func ks_fork_prepare() { Module.shared.prepareForFork() }

@c @implementation
public func ks_fork_parent() { Module.shared.parentAfterFork() }

@c @implementation
public func ks_fork_child() { Module.shared.childAfterFork() }
