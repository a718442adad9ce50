#!/usr/bin/env bash
# Short concurrency stress for `make test` (issue 8): 4 processes x 2 threads x
# 40 operations and 2 CLI import/delete rounds; `make stress` runs the long one.
# Usage: 60-stress.sh KEYSHARE MODULE.
set -u
exec bash "$(dirname "$0")/../stress/stress.sh" "${1:?keyshare binary}" "${2:?module path}" 4 2 40 2
