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
        // An array attribute's buffer is read as CK_ATTRIBUTEs only when it
        // holds all of them (PKCS #11 3.0 §5.7.5).
        let (entries, rv) = AttributeFill.evaluate(lookups, capacities: capacities) { i, n in
            let inner = pTemplate[i].pValue!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
            return (0..<n).map { inner[$0].pValue == nil ? nil : Optional(inner[$0].ulValueLen) }
        }
        for (i, e) in entries.enumerated() { fillAttribute(&pTemplate[i], e) }
        return rv
    }
}

/// One C_GetAttributeValue entry as `AttributeFill` decided it; an array
/// attribute's inner entries get the same treatment, their types set
/// ("the type element of attributes within the array ... MUST be set on
/// output").
private func fillAttribute(_ a: inout CK_ATTRIBUTE, _ e: AttributeFill.Entry) {
    switch e {
    case .copy(let bytes):
        if let dst = a.pValue, !bytes.isEmpty {
            bytes.withUnsafeBytes { dst.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        a.ulValueLen = CK_ULONG(bytes.count)
    case .length(let n):
        a.ulValueLen = n
    case .unavailable:
        a.ulValueLen = KS_CK_UNAVAILABLE_INFORMATION
    case .nested(let length, let inner):
        let array = a.pValue!.assumingMemoryBound(to: CK_ATTRIBUTE.self)
        for (k, (type, entry)) in inner.enumerated() {
            array[k].type = type
            fillAttribute(&array[k], entry)
        }
        a.ulValueLen = length
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
