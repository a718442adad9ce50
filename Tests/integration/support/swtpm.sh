# A real software TPM for the integration scripts (issue 17, docs/tpm.md):
# `swtpm socket` with a private state directory, on loopback only (the control
# port is the server port + 1), `--flags not-need-init,startup-clear`, started
# as a daemon that writes its PID file and stopped by that PID. The same
# pattern for 43-tpm.sh and 44-tpm-consumers.sh, which both source this file.
# Source it after lib.sh.

# tpm_start DIR PORT: swtpm on 127.0.0.1:PORT (control PORT+1), state in DIR.
tpm_start() {
  mkdir -p "$1"
  swtpm socket --tpmstate dir="$1" --tpm2 --server type=tcp,port="$2",bindaddr=127.0.0.1 \
    --ctrl type=tcp,port=$(($2 + 1)),bindaddr=127.0.0.1 --flags not-need-init,startup-clear --daemon --pid file="$1/pid"
}

# tpm_stop DIR: stops the swtpm whose PID file is DIR/pid, waits (at most 2.5 s) for it to exit.
tpm_stop() {
  local p
  p=$(cat "$1/pid" 2>/dev/null) || return 0
  case $p in ''|*[!0-9]*) return 0 ;; esac
  kill "$p" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.05; done
}

# free_port: a port P such that P and P+1 are both free on 127.0.0.1 now.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/$((p + 1))) 2>/dev/null && { echo "$p"; return; }
  done
}

# tpm_start_free DIR: swtpm on a free port pair, printed. A pair free now may
# be taken by the time swtpm binds: a few tries.
tpm_start_free() {
  local p
  for _ in 1 2 3 4 5; do p=$(free_port); tpm_start "$1" "$p" 2>/dev/null && { echo "$p"; return 0; }; done
  return 1
}
