// The dynamic library's own target: it holds no code, only the module-only
// link flags (version script, -z nodelete, -z defs; Package.swift), so that
// the `keyshare` executable can link the entry points (PKCS11Module) for the
// agent without inheriting them.
@_exported import PKCS11Module
