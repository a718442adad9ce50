import CPKCS11
import Keychain
import KeyshareCrypto

// PKCS #11 3.2 trust objects (CKO_TRUST, §4.15 of the 3.2 text; the standard form of NSS's
// CKO_NSS_TRUST): the keychain's trust anchors, the certificates marked trusted (`keyshare
// trust`, or CKA_TRUSTED set by the SO), each shown as a read-only trust object that names the
// certificate by issuer, serial number and hash and says what it is trusted for.
//
// Derived, never stored: the object follows its certificate (untrusted or deleted, the handle
// is invalid), and C_SetAttributeValue, C_DestroyObject and C_CopyObject answer
// CKR_ACTION_PROHIBITED (CKA_MODIFIABLE, CKA_DESTROYABLE and CKA_COPYABLE false); C_CreateObject
// of the class is refused as any unknown class (trust is set on the certificate).
// Found only by a template that names CKA_CLASS CKO_TRUST: a 3.0 host listing every object does
// not know the class and sees what it saw before 3.2 (the module cannot tell which interface
// a call came through, so the class in the template is the sign of a 3.2 host).
// An anchor is trusted as an anchor for every purpose: keyshare's trust settings have no
// per-purpose distinction (CKT_TRUST_ANCHOR for server and client authentication, code signing,
// e-mail protection, IPsec IKE, time stamping and OCSP signing).

/// The 3.2 constants (OASIS pkcs11t.h, version 3.2); p11-kit 0.24's header predates them.
let CKO_TRUST_32: CK_OBJECT_CLASS = 0x0B
let CKA_TRUST_SERVER_AUTH_32: CK_ATTRIBUTE_TYPE = 0x62C
let CKA_TRUST_CLIENT_AUTH_32: CK_ATTRIBUTE_TYPE = 0x62D
let CKA_TRUST_CODE_SIGNING_32: CK_ATTRIBUTE_TYPE = 0x62E
let CKA_TRUST_EMAIL_PROTECTION_32: CK_ATTRIBUTE_TYPE = 0x62F
let CKA_TRUST_IPSEC_IKE_32: CK_ATTRIBUTE_TYPE = 0x630
let CKA_TRUST_TIME_STAMPING_32: CK_ATTRIBUTE_TYPE = 0x631
let CKA_TRUST_OCSP_SIGNING_32: CK_ATTRIBUTE_TYPE = 0x632
let CKA_HASH_OF_CERTIFICATE_32: CK_ATTRIBUTE_TYPE = 0x635
let CKT_TRUST_ANCHOR_32: CK_ULONG = 2

extension Runtime {
    /// The trust objects of the session's token whose attributes equal every one of `template`'s.
    func trustObjects(_ s: Session, matching template: Template) throws -> [CK_OBJECT_HANDLE] {
        let q = ItemQuery(tokenID: s.tokenID, itemClass: .certificate)
        let trusted = try store.find(q, key: userKey(for: s.tokenID)).filter {
            $0.attributes.bool(CKA_TRUSTED) == true && !$0.isChainOnly && !(ObjectRules.isPrivate($0) && userKey(for: s.tokenID) == nil)
        }
        var out: [CK_OBJECT_HANDLE] = []
        for item in trusted {
            let h = lock.withLock { objects.trustHandle(token: s.tokenID, certificate: item.reference) }
            guard let view = try? resolveObject(s, h) else { continue }
            if template.allSatisfy({ view.attributes[$0.type] == $0.value }) { out.append(h) }
        }
        return out
    }

    /// The trust object's attributes, from its certificate as the store holds it now.
    func trustView(_ h: CK_OBJECT_HANDLE, _ entry: ObjectEntry, certificate ref: PersistentReference,
                   key: TokenKey?) throws -> ObjectView {
        let item: Item
        do {
            item = try store.item(ref, key: key)
        } catch KeychainError.itemNotFound {
            lock.withLock { objects.remove(h) }
            throw PKCS11Error.objectHandleInvalid
        }
        guard item.attributes.bool(CKA_TRUSTED) == true, let der = item.attributes[CKA_VALUE],
              let cert = try? Certificate(der: der) else {
            lock.withLock { objects.remove(h) }
            throw PKCS11Error.objectHandleInvalid
        }
        var a: AttributeMap = [:]
        a[CKA_CLASS] = AttributeCoding.ulong(CKO_TRUST_32)
        a[CKA_TOKEN] = AttributeCoding.bool(true)
        a[CKA_PRIVATE] = AttributeCoding.bool(false)
        a[CKA_MODIFIABLE] = AttributeCoding.bool(false)
        a[CKA_DESTROYABLE] = AttributeCoding.bool(false)
        a[CKA_COPYABLE] = AttributeCoding.bool(false)
        a[CKA_LABEL] = item.attributes[CKA_LABEL] ?? []
        a[CKA_UNIQUE_ID] = AttributeCoding.string("trust-" + ref.base64url)
        a[CKA_ISSUER] = cert.issuerDER
        a[CKA_SERIAL_NUMBER] = cert.serialNumberDER
        a[CKA_HASH_OF_CERTIFICATE_32] = cert.sha256Fingerprint
        a[CKA_NAME_HASH_ALGORITHM] = AttributeCoding.ulong(CK_ULONG(CKM_SHA256))
        for t in [CKA_TRUST_SERVER_AUTH_32, CKA_TRUST_CLIENT_AUTH_32, CKA_TRUST_CODE_SIGNING_32,
                  CKA_TRUST_EMAIL_PROTECTION_32, CKA_TRUST_IPSEC_IKE_32, CKA_TRUST_TIME_STAMPING_32,
                  CKA_TRUST_OCSP_SIGNING_32] {
            a[t] = AttributeCoding.ulong(CKT_TRUST_ANCHOR_32)
        }
        return ObjectView(handle: h, entry: entry, objectClass: CKO_TRUST_32, attributes: a)
    }
}
