import CPKCS11
import CPKCS11ABI
import PKCS11

// PKCS #11 §5.4: general-purpose functions.

@c @implementation
public func ks_C_Initialize(_ pInitArgs: UnsafeMutableRawPointer?) -> CK_RV {
    entry("C_Initialize", pInitArgs == nil ? "NULL" : "args") {
        var args: InitializeArguments?
        if let p = pInitArgs {
            let a = p.assumingMemoryBound(to: CK_C_INITIALIZE_ARGS.self).pointee
            let callbacks = [a.CreateMutex != nil, a.DestroyMutex != nil, a.LockMutex != nil, a.UnlockMutex != nil]
            args = InitializeArguments(flags: a.flags, mutexCallbackCount: callbacks.filter { $0 }.count,
                                       reservedIsNull: a.pReserved == nil)
        }
        try Module.current.initialize(args)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_Finalize(_ pReserved: UnsafeMutableRawPointer?) -> CK_RV {
    entry("C_Finalize") {
        try Module.current.finalize(reservedIsNull: pReserved == nil)
        return CKR_OK
    }
}

@c @implementation
public func ks_C_GetInfo(_ pInfo: UnsafeMutablePointer<CK_INFO>?) -> CK_RV {
    entry("C_GetInfo") {
        _ = try runtime()
        guard let pInfo else { throw PKCS11Error.argumentsBad }
        var info = CK_INFO()
        info.cryptokiVersion = version(ModuleInfo.cryptokiVersion)
        fill(&info.manufacturerID, ModuleInfo.manufacturer)
        info.flags = 0
        fill(&info.libraryDescription, ModuleInfo.description)
        info.libraryVersion = version(ModuleInfo.libraryVersion)
        pInfo.pointee = info
        return CKR_OK
    }
}

// Parallel function management: legacy, always "not parallel".

@c @implementation
public func ks_C_GetFunctionStatus(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_GetFunctionStatus", "hSession=\(hSession)") {
        _ = try runtime().session(hSession)
        return CKR_FUNCTION_NOT_PARALLEL
    }
}

@c @implementation
public func ks_C_CancelFunction(_ hSession: CK_SESSION_HANDLE) -> CK_RV {
    entry("C_CancelFunction", "hSession=\(hSession)") {
        _ = try runtime().session(hSession)
        return CKR_FUNCTION_NOT_PARALLEL
    }
}
