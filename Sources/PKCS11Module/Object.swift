import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.7: object management.

@c @implementation
public func ks_C_CreateObject(_ hSession: CK_SESSION_HANDLE, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                              _ ulCount: CK_ULONG, _ phObject: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_CreateObject", "hSession=\(hSession) count=\(ulCount)") {
        let rt = try runtime(session: hSession)
        guard let phObject else { throw PKCS11Error.argumentsBad }
        phObject.pointee = try rt.createObject(session: hSession, template: try template(pTemplate, ulCount))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_CopyObject(_ hSession: CK_SESSION_HANDLE, _ hObject: CK_OBJECT_HANDLE,
                            _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?, _ ulCount: CK_ULONG,
                            _ phNewObject: UnsafeMutablePointer<CK_OBJECT_HANDLE>?) -> CK_RV {
    entry("C_CopyObject", "hSession=\(hSession) hObject=\(hObject)") {
        let rt = try runtime(session: hSession)
        guard let phNewObject else { throw PKCS11Error.argumentsBad }
        phNewObject.pointee = try rt.copyObject(session: hSession, object: hObject, template: try template(pTemplate, ulCount))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_DestroyObject(_ hSession: CK_SESSION_HANDLE, _ hObject: CK_OBJECT_HANDLE) -> CK_RV {
    entry("C_DestroyObject", "hSession=\(hSession) hObject=\(hObject)") {
        try runtime().destroyObject(session: hSession, object: hObject)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_GetObjectSize(_ hSession: CK_SESSION_HANDLE, _ hObject: CK_OBJECT_HANDLE,
                               _ pulSize: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_GetObjectSize", "hSession=\(hSession) hObject=\(hObject)") {
        let rt = try runtime(session: hSession)
        guard let pulSize else { throw PKCS11Error.argumentsBad }
        pulSize.pointee = try rt.objectSize(session: hSession, object: hObject)
        return CKR_OK
    }
}

/// Every entry of the template is processed; the semantics layer decides
/// the per-entry outcome and the overall CK_RV (AttributeFill).
@c @implementation
public func ks_C_GetAttributeValue(_ hSession: CK_SESSION_HANDLE, _ hObject: CK_OBJECT_HANDLE,
                                   _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?, _ ulCount: CK_ULONG) -> CK_RV {
    entry("C_GetAttributeValue", "hSession=\(hSession) hObject=\(hObject) count=\(ulCount)") {
        let rt = try runtime(session: hSession)
        let count = try length(ulCount)
        guard let pTemplate else {
            // Still an error for a bad session or object, as with a template.
            _ = try rt.getAttributeValue(session: hSession, object: hObject, types: [])
            if count == 0 { return CKR_OK }
            throw PKCS11Error.argumentsBad
        }
        let types = (0..<count).map { pTemplate[$0].type }
        let capacities = (0..<count).map { pTemplate[$0].pValue == nil ? nil : Optional(pTemplate[$0].ulValueLen) }
        let lookups = try rt.getAttributeValue(session: hSession, object: hObject, types: types)
        let (entries, rv) = AttributeFill.evaluate(lookups, capacities: capacities)
        for (i, e) in entries.enumerated() {
            switch e {
            case .copy(let bytes):
                if let dst = pTemplate[i].pValue, !bytes.isEmpty {
                    bytes.withUnsafeBytes { dst.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                }
                pTemplate[i].ulValueLen = CK_ULONG(bytes.count)
            case .length(let n):
                pTemplate[i].ulValueLen = n
            case .unavailable:
                pTemplate[i].ulValueLen = KS_CK_UNAVAILABLE_INFORMATION
            }
        }
        return rv
    }
}

@c @implementation
public func ks_C_SetAttributeValue(_ hSession: CK_SESSION_HANDLE, _ hObject: CK_OBJECT_HANDLE,
                                   _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?, _ ulCount: CK_ULONG) -> CK_RV {
    entry("C_SetAttributeValue", "hSession=\(hSession) hObject=\(hObject) count=\(ulCount)") {
        let rt = try runtime(session: hSession)
        try rt.setAttributeValue(session: hSession, object: hObject, template: try template(pTemplate, ulCount))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_FindObjectsInit(_ hSession: CK_SESSION_HANDLE, _ pTemplate: UnsafeMutablePointer<CK_ATTRIBUTE>?,
                                 _ ulCount: CK_ULONG) -> CK_RV {
    entry("C_FindObjectsInit", "hSession=\(hSession) count=\(ulCount)") {
        let rt = try runtime(session: hSession)
        try rt.findObjectsInit(session: hSession, template: try template(pTemplate, ulCount))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_FindObjects(_ hSession: CK_SESSION_HANDLE, _ phObject: UnsafeMutablePointer<CK_OBJECT_HANDLE>?,
                             _ ulMaxObjectCount: CK_ULONG, _ pulObjectCount: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_FindObjects", "hSession=\(hSession) max=\(ulMaxObjectCount)") {
        let rt = try runtime(session: hSession)
        guard let pulObjectCount, phObject != nil || ulMaxObjectCount == 0 else { throw PKCS11Error.argumentsBad }
        let found = try rt.findObjects(session: hSession, max: try length(ulMaxObjectCount))
        if let phObject {
            for (i, h) in found.enumerated() { phObject[i] = h }
        }
        pulObjectCount.pointee = CK_ULONG(found.count)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_FindObjectsFinal(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_FindObjectsFinal", "hSession=\(hSession)") {
        try runtime().findObjectsFinal(session: hSession)
        return CKR_OK
    }
}
