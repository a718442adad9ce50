import Keychain

/// What one poll of an external PKCS #11 module saw: its present tokens and
/// their public objects (only allow-listed, public attributes: a private key
/// value is never even asked for). A plain value so it can be made in a
/// child process (crash isolation) and sent back as text.
public struct DriverSnapshot: Sendable, Equatable {
    public struct Token: Sendable, Equatable {
        public var label: String
        public var serial: String
        public var model: String
        public var objects: [AttributeMap]
    }
    public var tokens: [Token]

    public init(tokens: [Token]) { self.tokens = tokens }

    /// The attributes copied from the card, per class.
    static let certificateTypes: [UInt] = [
        CKA.class, CKA.certificateType, CKA.label, CKA.id, CKA.value, CKA.subject, CKA.issuer, CKA.serialNumber,
        CKA.uniqueID, CKA.certificateCategory, CKA.trusted,
    ]
    static let publicKeyTypes: [UInt] = [
        CKA.class, CKA.keyType, CKA.label, CKA.id, CKA.subject, CKA.modulus, CKA.modulusBits, CKA.publicExponent,
        CKA.ecParams, CKA.ecPoint, CKA.verify, CKA.encrypt, CKA.wrap, CKA.derive, CKA.uniqueID,
    ]
    /// Only public facts of a private key (shown without login on some cards).
    static let privateKeyTypes: [UInt] = [
        CKA.class, CKA.keyType, CKA.label, CKA.id, CKA.subject, CKA.modulus, CKA.publicExponent, CKA.ecParams,
        CKA.sign, CKA.decrypt, CKA.derive, CKA.uniqueID, CKA.alwaysAuthenticate,
    ]

    /// What a module answers for a card pulled while it is being read:
    /// CKR_DEVICE_REMOVED, CKR_TOKEN_NOT_PRESENT, CKR_SESSION_HANDLE_INVALID,
    /// CKR_SESSION_CLOSED, CKR_DEVICE_ERROR, CKR_TOKEN_NOT_RECOGNIZED.
    static let cardWent: Set<UInt> = [0x32, 0xE0, 0xB3, 0xB0, 0x30, 0xE1]

    /// Reads every present token of a loaded module, without logging in.
    static func read(_ lib: PKCS11Library) throws -> DriverSnapshot {
        var out: [Token] = []
        for slot in try lib.slots(tokenPresent: true) {
            guard let info = try? lib.tokenInfo(slot: slot), info.flags & 0x400 != 0 /* CKF_TOKEN_INITIALIZED */ else { continue }
            do {
                let session = try lib.openSession(slot: slot)
                defer { lib.closeSession(session) }
                var objects: [AttributeMap] = []
                for (cls, types) in [(CKO.certificate, certificateTypes), (CKO.publicKey, publicKeyTypes), (CKO.privateKey, privateKeyTypes)] {
                    for h in try lib.find(session: session, template: [CKA.class: AttributeCoding.ulong(cls)]) {
                        objects.append(lib.attributes(session: session, object: h, types: types))
                    }
                }
                out.append(Token(label: info.label, serial: info.serial, model: info.model, objects: objects))
            } catch let e as ExternalModuleError where cardWent.contains(e.rv) {
                continue  // pulled while being read: absent, not a failure of the module
            }
        }
        return DriverSnapshot(tokens: out)
    }

    /// Polls the module at `path` in this process. A module loaded earlier is
    /// re-initialised first when idle, because some (SoftHSM2) only see
    /// tokens created by other processes at C_Initialize. `environment`: the
    /// driver's stored variables, applied around its load (nil in a child
    /// started with them: the environment is already right).
    public static func probe(modulePath path: String, environment: [String: String]? = nil) throws -> DriverSnapshot {
        let (lib, fresh) = try PKCS11Library.sharedAndFresh(path, environment: environment)
        if !fresh { lib.rescanIfIdle() }
        return try read(lib)
    }

    // MARK: - text form: one line per token ("T" label serial model, hex) and object ("O" type=hex ...)

    public func serialized() -> String {
        var lines: [String] = []
        for t in tokens {
            lines.append("T \(Self.hex(Array(t.label.utf8))) \(Self.hex(Array(t.serial.utf8))) \(Self.hex(Array(t.model.utf8)))")
            for o in t.objects {
                lines.append((["O"] + o.keys.sorted().map { "\(String($0, radix: 16))=\(Self.hex(o[$0]!))" }).joined(separator: " "))
            }
        }
        lines.append("END")
        return lines.joined(separator: "\n") + "\n"
    }

    public init?(serialized text: String) {
        var tokens: [Token] = []
        var ended = false
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            switch parts.first {
            case "T":
                guard parts.count == 4, let l = Self.unhex(parts[1]), let s = Self.unhex(parts[2]), let m = Self.unhex(parts[3]) else { return nil }
                tokens.append(Token(label: String(decoding: l, as: UTF8.self), serial: String(decoding: s, as: UTF8.self),
                                    model: String(decoding: m, as: UTF8.self), objects: []))
            case "O":
                guard !tokens.isEmpty else { return nil }
                var attrs: AttributeMap = [:]
                for p in parts.dropFirst() {
                    let kv = p.split(separator: "=", omittingEmptySubsequences: false)
                    guard kv.count == 2, let t = UInt(kv[0], radix: 16), let v = Self.unhex(String(kv[1])) else { return nil }
                    attrs[t] = v
                }
                tokens[tokens.count - 1].objects.append(attrs)
            case "END":
                ended = true
            default:
                return nil
            }
        }
        guard ended else { return nil }  // a child that died mid-write
        self.tokens = tokens
    }

    static func hex(_ b: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(b.count * 2)
        for x in b { out.append(digits[Int(x >> 4)]); out.append(digits[Int(x & 15)]) }
        return b.isEmpty ? "-" : String(decoding: out, as: UTF8.self)
    }

    static func unhex(_ s: String) -> [UInt8]? {
        if s == "-" { return [] }
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < u.count {
            guard let hi = UInt8(String(decoding: u[i..<i + 1], as: UTF8.self), radix: 16),
                  let lo = UInt8(String(decoding: u[i + 1..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
