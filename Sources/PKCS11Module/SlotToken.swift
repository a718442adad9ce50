import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.5: slot and token management.

@c @implementation
public func ks_C_GetSlotList(_ tokenPresent: CK_BBOOL, _ pSlotList: UnsafeMutablePointer<CK_SLOT_ID>?,
                             _ pulCount: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_GetSlotList", "tokenPresent=\(tokenPresent) list=\(pSlotList == nil ? "NULL" : "buf")") {
        let slots = try runtime().slotList(tokenPresent: tokenPresent != 0)
        return deliverList(slots, pSlotList, pulCount)
    }
}

@c @implementation
public func ks_C_GetSlotInfo(_ slotID: CK_SLOT_ID, _ pInfo: UnsafeMutablePointer<CK_SLOT_INFO>?) -> CK_RV {
    entry("C_GetSlotInfo", "slot=\(slotID)") {
        let rt = try runtime()
        guard let pInfo else { throw PKCS11Error.argumentsBad }
        let s = try rt.slotInfo(slotID)
        var info = CK_SLOT_INFO()
        fill(&info.slotDescription, s.description)
        fill(&info.manufacturerID, s.manufacturer)
        info.flags = s.flags
        info.hardwareVersion = version(ModuleInfo.libraryVersion)
        info.firmwareVersion = version(ModuleInfo.libraryVersion)
        pInfo.pointee = info
        return CKR_OK
    }
}

@c @implementation
public func ks_C_GetTokenInfo(_ slotID: CK_SLOT_ID, _ pInfo: UnsafeMutablePointer<CK_TOKEN_INFO>?) -> CK_RV {
    entry("C_GetTokenInfo", "slot=\(slotID)") {
        let rt = try runtime()
        guard let pInfo else { throw PKCS11Error.argumentsBad }
        let t = try rt.tokenInfo(slotID)
        var info = CK_TOKEN_INFO()
        fill(&info.label, t.label)
        fill(&info.manufacturerID, t.manufacturer)
        fill(&info.model, t.model)
        fill(&info.serialNumber, t.serial)
        info.flags = t.flags
        info.ulMaxSessionCount = KS_CK_EFFECTIVELY_INFINITE
        info.ulSessionCount = t.sessionCount
        info.ulMaxRwSessionCount = KS_CK_EFFECTIVELY_INFINITE
        info.ulRwSessionCount = t.rwSessionCount
        info.ulMaxPinLen = t.maxPINLength
        info.ulMinPinLen = t.minPINLength
        info.ulTotalPublicMemory = KS_CK_UNAVAILABLE_INFORMATION
        info.ulFreePublicMemory = KS_CK_UNAVAILABLE_INFORMATION
        info.ulTotalPrivateMemory = KS_CK_UNAVAILABLE_INFORMATION
        info.ulFreePrivateMemory = KS_CK_UNAVAILABLE_INFORMATION
        info.hardwareVersion = version(ModuleInfo.libraryVersion)
        info.firmwareVersion = version(ModuleInfo.libraryVersion)
        fill(&info.utcTime, "")
        pInfo.pointee = info
        return CKR_OK
    }
}

/// Token insertion and removal (by any process) are slot events.
@c @implementation
public func ks_C_WaitForSlotEvent(_ flags: CK_FLAGS, _ pSlot: UnsafeMutablePointer<CK_SLOT_ID>?,
                                  _ pReserved: UnsafeMutableRawPointer?) -> CK_RV {
    entry("C_WaitForSlotEvent", "flags=0x\(String(flags, radix: 16))") {
        let rt = try runtime()
        guard let pSlot, pReserved == nil else { throw PKCS11Error.argumentsBad }
        pSlot.pointee = try rt.waitForSlotEvent(block: flags & CKF_DONT_BLOCK == 0)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_GetMechanismList(_ slotID: CK_SLOT_ID, _ pMechanismList: UnsafeMutablePointer<CK_MECHANISM_TYPE>?,
                                  _ pulCount: UnsafeMutablePointer<CK_ULONG>?) -> CK_RV {
    entry("C_GetMechanismList", "slot=\(slotID)") {
        let list = try runtime().mechanismList(slot: slotID)
        return deliverList(list, pMechanismList, pulCount)
    }
}

@c @implementation
public func ks_C_GetMechanismInfo(_ slotID: CK_SLOT_ID, _ type: CK_MECHANISM_TYPE,
                                  _ pInfo: UnsafeMutablePointer<CK_MECHANISM_INFO>?) -> CK_RV {
    entry("C_GetMechanismInfo", "slot=\(slotID) mechanism=0x\(String(type, radix: 16))") {
        let rt = try runtime()
        guard let pInfo else { throw PKCS11Error.argumentsBad }
        let m = try rt.mechanismInfo(slot: slotID, type: type)
        pInfo.pointee = CK_MECHANISM_INFO(ulMinKeySize: m.minKeySize, ulMaxKeySize: m.maxKeySize, flags: m.flags)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_InitToken(_ slotID: CK_SLOT_ID, _ pPin: UnsafeMutablePointer<CK_UTF8CHAR>?, _ ulPinLen: CK_ULONG,
                           _ pLabel: UnsafeMutablePointer<CK_UTF8CHAR>?) -> CK_RV {
    entry("C_InitToken", "slot=\(slotID)") {
        // Where no store exists yet, a call on the free slot creates it (General.swift).
        let rt = slotID == freeSlotID ? try Module.current.runtimeCreatingStore() : try runtime()
        let pin = try required(pPin, ulPinLen)
        let label = try required(pLabel, 32)
        try rt.initToken(slot: slotID, soPIN: pin, label: unpadded(label))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_InitPIN(_ hSession: CK_SESSION_HANDLE, _ pPin: UnsafeMutablePointer<CK_UTF8CHAR>?,
                         _ ulPinLen: CK_ULONG) -> CK_RV {
    entry("C_InitPIN", "hSession=\(hSession)") {
        let rt = try runtime(session: hSession)
        try rt.initPIN(session: hSession, pin: try required(pPin, ulPinLen))
        return CKR_OK
    }
}

@c @implementation
public func ks_C_SetPIN(_ hSession: CK_SESSION_HANDLE, _ pOldPin: UnsafeMutablePointer<CK_UTF8CHAR>?,
                        _ ulOldLen: CK_ULONG, _ pNewPin: UnsafeMutablePointer<CK_UTF8CHAR>?,
                        _ ulNewLen: CK_ULONG) -> CK_RV {
    entry("C_SetPIN", "hSession=\(hSession)") {
        let rt = try runtime(session: hSession)
        try rt.setPIN(session: hSession, old: try required(pOldPin, ulOldLen), new: try required(pNewPin, ulNewLen))
        return CKR_OK
    }
}
