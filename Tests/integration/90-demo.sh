#!/usr/bin/env bash
# `make demo` must keep working: run it on a throwaway store.
set -u
KS=${1:?}; MODULE=${2:?}
source "$(dirname "$0")/lib.sh"
new_home
dir=$(mktemp -d)
export KEYSHARE_HOME="$dir/store"
check_out "make demo runs end to end" "demo complete" bash "$HERE/demo.sh" "$KS" "$MODULE"
rm -rf "$dir"
finish
