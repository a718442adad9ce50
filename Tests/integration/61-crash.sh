#!/usr/bin/env bash
# Short crash-safety run for `make test` (issue 8): 20 writers SIGKILLed at
# random instants; `make stress` runs 200. Usage: 61-crash.sh KEYSHARE MODULE.
set -u
exec bash "$(dirname "$0")/../stress/crash.sh" "${1:?keyshare binary}" "${2:?module path}" 20
