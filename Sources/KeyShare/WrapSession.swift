import Keychain
import KeyshareCrypto
import Tokens

/// What `unwrap` found in a wrapped file's authenticated header.
public struct WrappedFileInfo: Sendable {
    public var group: String
    public var fileName: String
}

extension KeychainSession {
    /// The application tag of a group's wrapping key.
    static func groupKeyTag(_ group: String) -> [UInt8] { Array("keyshare.wrap-group:\(group)".utf8) }

    /// The group's 256-bit key: a sensitive, non-extractable secret key item
    /// of that access group, so only sessions bound to the group find it.
    /// Created (in `token`) when `create` and absent.
    func groupKey(_ group: String, create: Bool, token: String?) throws -> [UInt8] {
        if let bound = accessGroups, !bound.contains(group) { throw KeyShareError.notInAccessGroup(group) }
        let q = Query(itemClass: .secretKey, applicationTag: Self.groupKeyTag(group), accessGroup: group, matchLimit: .one)
        if let item = try findItems(q).first {
            guard let v = item.attributes[CKA.value], v.count == AESGCM.keySize else {
                throw KeyShareError.authenticationNeeded("the key of group \(group) is sealed; unlock its token")
            }
            return v
        }
        guard create else {
            throw KeyShareError.invalidParameter("no key for group \(group) in this keychain (unlock the token that holds it)")
        }
        let record = try resolve(token)
        let key = try requireKey(record.tokenID)
        let value = try SecureRandom.bytes(AESGCM.keySize)
        let attrs: AttributeMap = [
            CKA.token: AttributeCoding.bool(true), CKA.private: AttributeCoding.bool(true),
            CKA.keyType: AttributeCoding.ulong(CKK.aes), CKA.label: AttributeCoding.string("wrap group \(group)"),
            CKA.value: value, CKA.valueLen: AttributeCoding.ulong(UInt(value.count)),
            CKA.sensitive: AttributeCoding.bool(true), CKA.extractable: AttributeCoding.bool(false),
            CKA.encrypt: AttributeCoding.bool(false), CKA.decrypt: AttributeCoding.bool(false),
            KeyShareAttribute.applicationTag: Self.groupKeyTag(group),
        ]
        try mapped {
            try store.transaction {
                let ref = try store.add(token: record.tokenID, itemClass: .secretKey, attributes: attrs, key: key)
                try assign(ref, to: group)
            }
        }
        return value
    }

    /// Wraps `input` for `group` into `output` (mode 0600), creating the
    /// group's key on first use. `fileName` (default: the input's base name)
    /// is recorded in the authenticated header.
    public func wrap(input: String, output: String, group: String, fileName: String? = nil, token: String? = nil,
                     segmentSize: Int = FileWrapping.defaultSegmentSize) throws {
        guard !group.isEmpty, group.utf8.count < 1024 else { throw KeyShareError.invalidParameter("bad group ID") }
        let reader = try FileReader(path: input)
        let peek = try FileReader(path: input)
        if (try? FileWrapping.readHeader(peek)) != nil {
            throw KeyShareError.invalidParameter("\(input) is already wrapped")
        }
        let name = fileName ?? String(input.split(separator: "/").last ?? "")
        var groupKey = try groupKey(group, create: true, token: token)
        defer { groupKey = [] }
        guard name.utf8.count < 4096, (1...(16 << 20)).contains(segmentSize) else {
            throw KeyShareError.invalidParameter("file name too long or bad segment size")
        }
        let header = FileWrapping.Header(group: group, fileName: name, segmentSize: segmentSize,
                                         salt: try SecureRandom.bytes(16), noncePrefix: try SecureRandom.bytes(7))
        let writer = try FileWriter(path: output)
        try FileWrapping.seal(reader, writer, header: header, groupKey: groupKey)
        try writer.commit()
    }

    /// The header of a wrapped file, without decrypting; `notWrapped` for a plain file.
    public func wrappedFileInfo(_ path: String) throws -> WrappedFileInfo {
        let (h, _) = try FileWrapping.readHeader(FileReader(path: path))
        return WrappedFileInfo(group: h.group, fileName: h.fileName)
    }

    /// Unwraps `input` into `output` when this session belongs to the file's
    /// group. `notWrapped` for a plain file (use it as is); `notInAccessGroup`
    /// for another group's file; `wrappedFileDamaged` on any tampering or
    /// truncation, in which case `output` is not created.
    @discardableResult
    public func unwrap(input: String, output: String) throws -> WrappedFileInfo {
        let reader = try FileReader(path: input)
        let (h, headerBytes) = try FileWrapping.readHeader(reader)
        let groupKey = try groupKey(h.group, create: false, token: nil)
        let writer = try FileWriter(path: output)
        try FileWrapping.open(reader, writer, header: h, headerBytes: headerBytes, groupKey: groupKey)
        try writer.commit()
        return WrappedFileInfo(group: h.group, fileName: h.fileName)
    }
}
