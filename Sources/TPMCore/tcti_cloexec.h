// keyshare's close-on-exec TCTI for "swtpm:" and "device:" (tcti_cloexec.c).
#ifndef KTCTI_H
#define KTCTI_H
#include <tss2/tss2_tcti.h>

/// Whether this TCTI string is one keyshare opens itself ("swtpm[:conf]", "device[:path]").
int ktcti_handles(const char *tcti);
/// Opens it: every descriptor it makes is close-on-exec from its creation.
TSS2_RC ktcti_open(const char *tcti, TSS2_TCTI_CONTEXT **out);
void ktcti_close(TSS2_TCTI_CONTEXT *c);

#endif
