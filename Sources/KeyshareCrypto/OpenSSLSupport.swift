import COpenSSL

/// Small bridges between Swift byte arrays and OpenSSL's BIO / BIGNUM / i2d
/// conventions, kept in one place so every caller frees what it allocates.
enum OSSL {
    /// Runs `body` with a read-only memory BIO over `bytes`; the BIO never
    /// outlives the call, so it can point straight into the array's storage.
    static func withReadBIO<T>(_ bytes: [UInt8], _ operation: String, _ body: (OpaquePointer) throws -> T) throws -> T {
        try bytes.withUnsafeBufferPointer { buf in
            let bio = buf.baseAddress.map { BIO_new_mem_buf($0, Int32(buf.count)) } ?? BIO_new_mem_buf("", 0)
            guard let bio else {
                throw CryptoError.openssl(operation)
            }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }

    /// Runs `body` with a writable memory BIO and returns what it wrote.
    static func collectBIO(_ operation: String, _ body: (OpaquePointer) -> Bool) throws -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openssl(operation) }
        defer { BIO_free(bio) }
        guard body(bio) else { throw CryptoError.openssl(operation) }
        var ptr: UnsafeMutablePointer<CChar>? = nil
        let len = ks_BIO_get_mem_data(bio, &ptr)
        guard len > 0, let p = ptr else { return [] }
        return p.withMemoryRebound(to: UInt8.self, capacity: len) { Array(UnsafeBufferPointer(start: $0, count: len)) }
    }

    /// Two-pass i2d: ask for the length, then encode into a Swift buffer.
    static func i2d(_ operation: String, _ encode: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) throws -> [UInt8] {
        let len = encode(nil)
        guard len > 0 else { throw CryptoError.openssl(operation) }
        var out = [UInt8](repeating: 0, count: Int(len))
        let written = out.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p: UnsafeMutablePointer<UInt8>? = buf.baseAddress
            return encode(&p)
        }
        guard written == len else { throw CryptoError.openssl(operation) }
        return out
    }

    /// Runs a d2i-style decoder over `bytes`, handing it the moving pointer.
    static func d2i<T>(_ bytes: [UInt8], _ decode: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> T?) -> (T, consumed: Int)? {
        bytes.withUnsafeBufferPointer { buf -> (T, consumed: Int)? in
            guard let base = buf.baseAddress, buf.count > 0 else { return nil }
            var p: UnsafePointer<UInt8>? = base
            guard let v = decode(&p, buf.count) else { return nil }
            return (v, p.map { $0 - base } ?? buf.count)
        }
    }

    /// d2i_X509 into a certificate of keyshare's library context (`CryptoEngine.context`), so its
    /// public key and signature checks never fetch from the default one. On failure d2i_X509 frees
    /// the object it was given.
    static func decodeX509(_ p: UnsafeMutablePointer<UnsafePointer<UInt8>?>, _ n: Int) -> OpaquePointer? {
        var x: OpaquePointer? = X509_new_ex(CryptoEngine.context, nil)
        guard x != nil else { return nil }
        return d2i_X509(&x, p, n)
    }

    static func bytes(of bn: OpaquePointer?, padTo width: Int = 0) -> [UInt8] {
        guard let bn else { return [] }
        let n = max(Int((BN_num_bits(bn) + 7) / 8), width)
        if n == 0 { return [0] }
        var out = [UInt8](repeating: 0, count: n)
        _ = BN_bn2binpad(bn, &out, Int32(n))
        return out
    }

    static func bignum(_ bytes: [UInt8]) throws -> OpaquePointer {
        guard let bn = bytes.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
            throw CryptoError.openssl("big number")
        }
        return bn
    }

    static func asn1StringBytes(_ s: UnsafePointer<ASN1_STRING>?) -> [UInt8] {
        guard let s, let data = ASN1_STRING_get0_data(s) else { return [] }
        let len = Int(ASN1_STRING_length(s))
        return Array(UnsafeBufferPointer(start: data, count: max(0, len)))
    }

    static func asn1String(_ s: UnsafePointer<ASN1_STRING>?) -> String {
        String(decoding: asn1StringBytes(s), as: UTF8.self)
    }

    static func objectText(_ obj: OpaquePointer?) -> String {
        guard let obj else { return "" }
        var buf = [CChar](repeating: 0, count: 128)
        let n = OBJ_obj2txt(&buf, Int32(buf.count), obj, 1)
        guard n > 0 else { return "" }
        if Int(n) >= buf.count {
            buf = [CChar](repeating: 0, count: Int(n) + 1)
            _ = OBJ_obj2txt(&buf, Int32(buf.count), obj, 1)
        }
        return string(buf)
    }

    /// A NUL-terminated C buffer as a Swift string.
    static func string(_ buf: [CChar]) -> String {
        String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Overwrites a buffer that held secret material before it is released.
    static func cleanse(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { OPENSSL_cleanse(b, $0.count) } }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits: [Character] = Array("0123456789ABCDEF")
        var s = ""
        s.reserveCapacity(bytes.count * 2)
        for b in bytes {
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0xF)])
        }
        return s
    }
}

/// A callback that refuses to supply a passphrase: without it OpenSSL would
/// prompt on the controlling terminal, which a library must never do.
let noPassphraseCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { _, _, _, _ in -1 }
