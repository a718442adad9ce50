#ifndef KEYSHARE_CSYSTEMD_SHIM_H
#define KEYSHARE_CSYSTEMD_SHIM_H
// libsystemd's journal API (Debian libsystemd-dev), for the agent's audit
// records (Sources/KeyshareAgent/Audit.swift). sd_journal_send is variadic:
// Swift calls sd_journal_sendv with the fields as iovecs.
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#endif
