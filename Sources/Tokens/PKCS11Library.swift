#if canImport(Glibc)
import Glibc
#endif
internal import CPKCS11
import Keychain
import KeyshareCrypto

/// Why talking to another PKCS #11 module failed. Carries the CK_RV and the
/// function, never an argument (a PIN could be one).
public struct ExternalModuleError: Error, Equatable, CustomStringConvertible, Sendable {
    public var function: String
    public var rv: UInt
    public var message: String?

    public var description: String {
        message ?? "\(function) failed with CKR 0x\(String(rv, radix: 16, uppercase: true))"
    }

    /// Codes the module layer passes through to its own caller unchanged.
    public static let pinIncorrect: UInt = 0xA0
    public static let deviceRemoved: UInt = 0x32
    public static let tokenNotPresent: UInt = 0xE0
}

/// Another PKCS #11 module loaded into this process (dlopen + C_GetFunctionList).
/// One instance per path per process: C_Initialize is process-wide, and the
/// library is never unloaded (its threads may still run).
///
/// Lifecycle, in the order a module expects it (PKCS #11 §5.4: sessions are
/// closed, then C_Finalize, and nothing is called after it):
/// - keyshare's own C_Finalize closes its card sessions and then finalizes
///   every card module it initialised (`finalizeAll`); the next use
///   initialises it again;
/// - at process exit an atexit handler, registered after the card module
///   was loaded and so run before the module's own exit-time destructors
///   (SoftHSM2 tears its singleton down then), does the same; a keyshare
///   C_Finalize that a host runs later still (OpenSSL's cleanup, from
///   libp11's engine) then calls nothing in the card module. Calling
///   C_CloseSession into a module whose destructors had run is the crash
///   `openssl -engine pkcs11` showed at exit;
/// - a module this process did not initialise (C_Initialize answered
///   CKR_CRYPTOKI_ALREADY_INITIALIZED: the host uses it too) is never
///   finalized nor re-initialised by keyshare.
final class PKCS11Library: @unchecked Sendable {
    let path: String
    private let functions: UnsafeMutablePointer<CK_FUNCTION_LIST>

    private nonisolated(unsafe) static var loaded: [String: PKCS11Library] = [:]
    private nonisolated(unsafe) static var exitHandlerRegistered = false
    private static let loadLock = Lock()

    // Guarded by `loadLock`.
    /// C_Initialize succeeded and no C_Finalize since.
    private var live = false
    /// This process's C_Initialize was the one that initialised the module.
    private var owned = false
    /// The process that initialised it: a forked child must not finalize
    /// what its parent still uses (it would release the parent's PC/SC context).
    private var initializedBy: pid_t = 0
    /// The process is exiting: nothing is called any more.
    private var exiting = false
    /// Sessions held open across calls (card logins), closed before C_Finalize.
    private var heldSessions: Set<UInt> = []
    /// Counts C_Initialize calls: a session handle is only meaningful in the
    /// generation that opened it (after a re-initialisation the module may
    /// hand the same number to another session).
    private(set) var generation = 0

    /// The driver's stored variables, applied around every (re)initialisation
    /// in this process (DriverEnvironment); nil: the environment as it is.
    private var environment: [String: String]?
    /// What the live initialisation was given.
    private var initializedWith: [String: String]?

    static func shared(_ path: String, environment: [String: String]? = nil) throws -> PKCS11Library {
        try sharedAndFresh(path, environment: environment).library
    }

    /// The library, and whether this call (re)initialised it. A module whose
    /// stored variables changed since its initialisation (`driver set-env`)
    /// is initialised again with the new ones when this process may do so
    /// (idle, initialised here); otherwise it keeps what it read.
    static func sharedAndFresh(_ path: String, environment: [String: String]? = nil) throws -> (library: PKCS11Library, fresh: Bool) {
        try loadLock.withLock {
            if let l = loaded[path] {
                if environment != nil { l.environment = environment }
                if l.live && l.initializedWith != l.environment && l.owned && l.heldSessions.isEmpty && l.initializedBy == getpid() {
                    _ = l.functions.pointee.C_Finalize?(nil)
                    l.live = false
                }
                if l.live { return (l, false) }
                try l.initializeLocked()
                return (l, true)
            }
            // Modules may read their configuration when loaded, too.
            let l = try DriverEnvironment.applying(environment) { try PKCS11Library(path: path) }
            l.environment = environment
            try l.initializeLocked()
            loaded[path] = l
            if !exitHandlerRegistered {
                // After the dlopen above, so it runs before the module's own
                // exit-time destructors (atexit runs in reverse order).
                exitHandlerRegistered = true
                atexit { PKCS11Library.finalizeAll(exiting: true) }
            }
            return (l, true)
        }
    }

    private init(path: String) throws {
        self.path = path
        guard access(path, F_OK) == 0 else {
            throw ExternalModuleError(function: "dlopen", rv: 0, message: "no such file: \(path)")
        }
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let why = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw ExternalModuleError(function: "dlopen", rv: 0, message: "cannot load \(path): \(why)")
        }
        guard let sym = dlsym(handle, "C_GetFunctionList") else {
            throw ExternalModuleError(function: "dlsym", rv: 0, message: "\(path) is not a PKCS #11 module (no C_GetFunctionList)")
        }
        typealias GetList = @convention(c) (UnsafeMutablePointer<UnsafeMutablePointer<CK_FUNCTION_LIST>?>?) -> CK_RV
        var list: UnsafeMutablePointer<CK_FUNCTION_LIST>?
        let rv = unsafeBitCast(sym, to: GetList.self)(&list)
        guard rv == CKR_OK, let list else { throw ExternalModuleError(function: "C_GetFunctionList", rv: UInt(rv)) }
        functions = list
    }

    /// Called with `loadLock` held.
    private func initializeLocked() throws {
        guard !exiting else { throw ExternalModuleError(function: "C_Initialize", rv: UInt(CKR_CRYPTOKI_NOT_INITIALIZED)) }
        var args = CK_C_INITIALIZE_ARGS()
        args.flags = CK_FLAGS(CKF_OS_LOCKING_OK)
        // A module reads its configuration (SOFTHSM2_CONF, OPENSC_CONF) here.
        let irv = DriverEnvironment.applying(environment) {
            functions.pointee.C_Initialize.map { f in withUnsafeMutablePointer(to: &args) { f(UnsafeMutableRawPointer($0)) } }
        } ?? CK_RV(CKR_FUNCTION_NOT_SUPPORTED)
        guard irv == CKR_OK || irv == CKR_CRYPTOKI_ALREADY_INITIALIZED else {
            throw ExternalModuleError(function: "C_Initialize", rv: UInt(irv))
        }
        live = true
        initializedWith = environment
        owned = irv == CKR_OK
        initializedBy = getpid()
        generation += 1
    }

    /// Called with `loadLock` held: closes the sessions keyshare holds, then
    /// C_Finalize when keyshare initialised the module in this process.
    private func finalizeLocked() {
        guard live else { return }
        live = false
        guard initializedBy == getpid() else { heldSessions.removeAll(); return }
        for h in heldSessions.sorted() { _ = functions.pointee.C_CloseSession?(CK_SESSION_HANDLE(h)) }
        heldSessions.removeAll()
        if owned { _ = functions.pointee.C_Finalize?(nil) }
    }

    /// keyshare's C_Finalize (after its card sessions were closed) and process
    /// exit: every card module is finalized, in load order.
    static func finalizeAll(exiting: Bool = false) {
        loadLock.withLock {
            for l in loaded.values.sorted(by: { $0.path < $1.path }) {
                if exiting { l.exiting = true }
                l.finalizeLocked()
            }
        }
    }

    /// Some modules (SoftHSM2) read their token list once, at C_Initialize;
    /// a card initialised since is seen only after C_Finalize + C_Initialize,
    /// which is safe only when this process holds no session on the library
    /// and initialised it itself.
    func rescanIfIdle() {
        Self.loadLock.withLock {
            guard live, owned, heldSessions.isEmpty, initializedBy == getpid() else { return }
            _ = functions.pointee.C_Finalize?(nil)
            live = false
            try? initializeLocked()
        }
    }

    /// Opens a session kept open across calls (a card login), closed before
    /// C_Finalize; returns it with the generation it belongs to.
    func openHeldSession(slot: UInt) throws -> (session: UInt, generation: Int) {
        let h = try openSession(slot: slot)
        return Self.loadLock.withLock { () -> (UInt, Int) in
            heldSessions.insert(h)
            return (h, generation)
        }
    }

    /// Closes a held session, unless C_Finalize (which closed it) came first.
    func closeHeldSession(_ h: UInt, generation g: Int) {
        Self.loadLock.withLock {
            guard live, g == generation, heldSessions.remove(h) != nil else { return }
            _ = functions.pointee.C_CloseSession?(CK_SESSION_HANDLE(h))
        }
    }

    /// Whether a session of generation `g` still exists in the module.
    func isCurrent(_ g: Int) -> Bool { Self.loadLock.withLock { live && g == generation } }

    private var isLive: Bool { Self.loadLock.withLock { live } }

    private func check(_ name: String, _ rv: CK_RV?) throws {
        guard let rv else {
            throw ExternalModuleError(function: name, rv: UInt(isLive ? CKR_FUNCTION_NOT_SUPPORTED : CKR_CRYPTOKI_NOT_INITIALIZED))
        }
        guard rv == CKR_OK else { throw ExternalModuleError(function: name, rv: UInt(rv)) }
    }

    /// The module's functions while it is initialised; an empty table (every
    /// call "not supported", reported as not initialised) after C_Finalize.
    private var f: CK_FUNCTION_LIST { isLive ? functions.pointee : CK_FUNCTION_LIST() }

    func slots(tokenPresent: Bool) throws -> [UInt] {
        var count: CK_ULONG = 0
        let present = CK_BBOOL(tokenPresent ? 1 : 0)
        for _ in 0..<4 {
            try check("C_GetSlotList", f.C_GetSlotList?(present, nil, &count))
            var list = [CK_SLOT_ID](repeating: 0, count: Int(count))
            let rv = f.C_GetSlotList?(present, &list, &count)
            if rv == CKR_BUFFER_TOO_SMALL { continue }
            try check("C_GetSlotList", rv)
            return list.prefix(Int(count)).map { UInt($0) }
        }
        throw ExternalModuleError(function: "C_GetSlotList", rv: UInt(CKR_BUFFER_TOO_SMALL))
    }

    struct TokenDescription: Sendable, Equatable {
        var label: String
        var serial: String
        var model: String
        var manufacturer: String
        var flags: UInt
    }

    func tokenInfo(slot: UInt) throws -> TokenDescription {
        var info = CK_TOKEN_INFO()
        try check("C_GetTokenInfo", f.C_GetTokenInfo?(CK_SLOT_ID(slot), &info))
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { raw in
                var bytes = Array(raw)
                while let last = bytes.last, last == 0x20 || last == 0 { bytes.removeLast() }
                return String(decoding: bytes, as: UTF8.self)
            }
        }
        return TokenDescription(label: text(info.label), serial: text(info.serialNumber), model: text(info.model),
                                manufacturer: text(info.manufacturerID), flags: UInt(info.flags))
    }

    /// C_WaitForSlotEvent with CKF_DONT_BLOCK: a slot, nil for no event, or
    /// an error (many modules answer CKR_FUNCTION_NOT_SUPPORTED).
    func pollSlotEvent() throws -> UInt? {
        var slot: CK_SLOT_ID = 0
        let rv = f.C_WaitForSlotEvent?(CK_FLAGS(CKF_DONT_BLOCK), &slot, nil)
        if rv == CKR_NO_EVENT { return nil }
        try check("C_WaitForSlotEvent", rv)
        return UInt(slot)
    }

    /// C_WaitForSlotEvent, blocking or not, as the raw return value (the
    /// event watcher tells "not supported" from "no event" from an error).
    func waitForSlotEvent(block: Bool) -> (rv: UInt, slot: UInt) {
        var slot: CK_SLOT_ID = 0
        guard let wait = f.C_WaitForSlotEvent else {
            return (UInt(isLive ? CKR_FUNCTION_NOT_SUPPORTED : CKR_CRYPTOKI_NOT_INITIALIZED), 0)
        }
        let rv = wait(block ? 0 : CK_FLAGS(CKF_DONT_BLOCK), &slot, nil)
        return (UInt(rv), UInt(slot))
    }

    func openSession(slot: UInt) throws -> UInt {
        var h: CK_SESSION_HANDLE = 0
        try check("C_OpenSession", f.C_OpenSession?(CK_SLOT_ID(slot), CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &h))
        return UInt(h)
    }

    func closeSession(_ h: UInt) {
        _ = f.C_CloseSession?(CK_SESSION_HANDLE(h))
    }

    /// Login as user. PKCS #11 login is per application: when this process
    /// is already logged in to the card, log out and in again, so the PIN
    /// given now is always checked by the card.
    func login(session: UInt, pin: [UInt8]) throws {
        var p = pin
        defer { for i in p.indices { p[i] = 0 } }
        func attempt() -> CK_RV? {
            p.withUnsafeMutableBufferPointer { b in
                f.C_Login?(CK_SESSION_HANDLE(session), CK_USER_TYPE(CKU_USER), b.baseAddress, CK_ULONG(b.count))
            }
        }
        var rv = attempt()
        if rv == CKR_USER_ALREADY_LOGGED_IN {
            _ = f.C_Logout?(CK_SESSION_HANDLE(session))
            rv = attempt()
        }
        try check("C_Login", rv)
    }

    func logout(session: UInt) {
        _ = f.C_Logout?(CK_SESSION_HANDLE(session))
    }

    /// Handles of the objects matching `template` (exact attribute values).
    func find(session: UInt, template: AttributeMap) throws -> [UInt] {
        let s = CK_SESSION_HANDLE(session)
        var storage = template.map { ($0.key, $0.value) }
        var attrs: [CK_ATTRIBUTE] = []
        var out: [UInt] = []
        try withAttributePointers(&storage) { pointers in
            attrs = pointers
            try check("C_FindObjectsInit", f.C_FindObjectsInit?(s, &attrs, CK_ULONG(attrs.count)))
            defer { _ = f.C_FindObjectsFinal?(s) }
            var batch = [CK_OBJECT_HANDLE](repeating: 0, count: 64)
            while true {
                var n: CK_ULONG = 0
                try check("C_FindObjects", f.C_FindObjects?(s, &batch, CK_ULONG(batch.count), &n))
                if n == 0 { break }
                out += batch.prefix(Int(n)).map { UInt($0) }
            }
        }
        return out
    }

    /// The requested attributes one by one, so one sensitive or unknown
    /// attribute does not hide the others; absent ones are left out.
    func attributes(session: UInt, object: UInt, types: [UInt]) -> AttributeMap {
        var out: AttributeMap = [:]
        for type in types {
            var a = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(type), pValue: nil, ulValueLen: 0)
            guard f.C_GetAttributeValue?(CK_SESSION_HANDLE(session), CK_OBJECT_HANDLE(object), &a, 1) == CKR_OK,
                  a.ulValueLen != KS_CK_UNAVAILABLE_INFORMATION, a.ulValueLen < 1 << 20 else { continue }
            var value = [UInt8](repeating: 0, count: Int(a.ulValueLen))
            let rv = value.withUnsafeMutableBytes { b -> CK_RV? in
                a.pValue = b.baseAddress
                return f.C_GetAttributeValue?(CK_SESSION_HANDLE(session), CK_OBJECT_HANDLE(object), &a, 1)
            }
            guard rv == CKR_OK else { continue }
            out[type] = Array(value.prefix(Int(a.ulValueLen)))
        }
        return out
    }

    /// One complete signature (or decryption, or derivation): Init then the
    /// single-part call with a length query first.
    enum Operation { case sign, decrypt }

    func perform(_ op: Operation, session: UInt, mechanism: UInt, parameter: [UInt8], key: UInt, input: [UInt8]) throws -> [UInt8] {
        let s = CK_SESSION_HANDLE(session)
        var param = parameter
        try param.withUnsafeMutableBytes { pb in
            var m = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(mechanism), pParameter: pb.count == 0 ? nil : pb.baseAddress,
                                 ulParameterLen: CK_ULONG(pb.count))
            switch op {
            case .sign: try check("C_SignInit", f.C_SignInit?(s, &m, CK_OBJECT_HANDLE(key)))
            case .decrypt: try check("C_DecryptInit", f.C_DecryptInit?(s, &m, CK_OBJECT_HANDLE(key)))
            }
        }
        var data = input
        var len: CK_ULONG = 0
        let name = op == .sign ? "C_Sign" : "C_Decrypt"
        func step(_ out: UnsafeMutablePointer<CK_BYTE>?) -> CK_RV? {
            data.withUnsafeMutableBufferPointer { d in
                switch op {
                case .sign: f.C_Sign?(s, d.baseAddress, CK_ULONG(d.count), out, &len)
                case .decrypt: f.C_Decrypt?(s, d.baseAddress, CK_ULONG(d.count), out, &len)
                }
            }
        }
        try check(name, step(nil))
        var out = [UInt8](repeating: 0, count: Int(len))
        try check(name, out.withUnsafeMutableBufferPointer { step($0.baseAddress) })
        return Array(out.prefix(Int(len)))
    }
}

extension PKCS11Library {
    /// CKM_ECDH1_DERIVE (CKD_NULL, no shared data) with the card's private
    /// key `key`: the card makes the shared secret Z as a session generic
    /// secret, whose CKA_VALUE is read and the card object destroyed at once
    /// (also when reading fails). Only Z leaves the card, as in any ECDH.
    func deriveECDH(session: UInt, key: UInt, publicData: [UInt8]) throws -> [UInt8] {
        let s = CK_SESSION_HANDLE(session)
        let no = AttributeCoding.bool(false), yes = AttributeCoding.bool(true)
        var template: [(UInt, [UInt8])] = [
            (CKA.class, AttributeCoding.ulong(CKO.secretKey)), (CKA.keyType, AttributeCoding.ulong(CKK.genericSecret)),
            (CKA.token, no), (CKA.sensitive, no), (CKA.extractable, yes),
        ]
        var pub = publicData
        var handle: CK_OBJECT_HANDLE = 0
        try pub.withUnsafeMutableBufferPointer { pb in
            var params = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                                ulPublicDataLen: CK_ULONG(pb.count), pPublicData: pb.baseAddress)
            try withUnsafeMutablePointer(to: &params) { pp in
                var m = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_ECDH1_DERIVE), pParameter: UnsafeMutableRawPointer(pp),
                                     ulParameterLen: CK_ULONG(MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size))
                try withAttributePointers(&template) { pointers in
                    var attrs = pointers
                    try check("C_DeriveKey", f.C_DeriveKey?(s, &m, CK_OBJECT_HANDLE(key), &attrs, CK_ULONG(attrs.count), &handle))
                }
            }
        }
        guard handle != 0 else {
            throw ExternalModuleError(function: "C_DeriveKey", rv: UInt(CKR_GENERAL_ERROR))
        }
        defer { _ = f.C_DestroyObject?(s, handle) }
        var a = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE), pValue: nil, ulValueLen: 0)
        try check("C_GetAttributeValue", f.C_GetAttributeValue?(s, handle, &a, 1))
        guard a.ulValueLen != KS_CK_UNAVAILABLE_INFORMATION, a.ulValueLen > 0, a.ulValueLen <= 1024 else {
            throw ExternalModuleError(function: "C_GetAttributeValue", rv: UInt(CKR_ATTRIBUTE_SENSITIVE))
        }
        var value = [UInt8](repeating: 0, count: Int(a.ulValueLen))
        do {
            try value.withUnsafeMutableBytes { b in
                a.pValue = b.baseAddress
                try check("C_GetAttributeValue", f.C_GetAttributeValue?(s, handle, &a, 1))
            }
        } catch {
            for i in value.indices { value[i] = 0 }
            throw error
        }
        let n = min(Int(a.ulValueLen), value.count)
        for i in n..<value.count { value[i] = 0 }
        value.removeLast(value.count - n)
        return value
    }
}

/// A C template whose value buffers stay allocated for the call.
private func withAttributePointers<R>(_ storage: inout [(UInt, [UInt8])], _ body: ([CK_ATTRIBUTE]) throws -> R) rethrows -> R {
    var buffers: [UnsafeMutableRawPointer] = []
    defer { for b in buffers { b.deallocate() } }
    var attrs: [CK_ATTRIBUTE] = []
    for (type, value) in storage {
        let b = UnsafeMutableRawPointer.allocate(byteCount: max(1, value.count), alignment: 8)
        buffers.append(b)
        value.withUnsafeBytes { if let base = $0.baseAddress { b.copyMemory(from: base, byteCount: value.count) } }
        attrs.append(CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(type), pValue: b, ulValueLen: CK_ULONG(value.count)))
    }
    return try body(attrs)
}
