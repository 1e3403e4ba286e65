# shellcheck shell=bash
# Shared helpers for scripts/services (sourced, not executed).

# Progress goes to stderr; stdout is reserved for `env`.
log() { printf 'services: %s%s\n' "${SVC:+$SVC: }" "$*" >&2; }
die() { printf 'services: %serror: %s\n' "${SVC:+$SVC: }" "$*" >&2; exit 1; }

now_ms() { date +%s%3N; }
since() { local ms=$(( $(now_ms) - $1 )); printf '%d.%01ds' $((ms / 1000)) $(((ms % 1000) / 100)); }

# Prints the last lines of a log file, indented, to stderr (used on every start failure).
tail_log() {
  local file=$1 n=${2:-30}
  if [[ -s $file ]]; then
    printf 'services: --- last %d lines of %s ---\n' "$n" "$file" >&2
    tail -n "$n" "$file" | sed 's/^/    /' >&2
  else
    printf 'services: (no log at %s)\n' "$file" >&2
  fi
}

# True when something accepts TCP connections on 127.0.0.1:<port>.
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# True when <pid> is alive and its command line contains <pattern>. /proc is used instead of
# `kill -0` so that a non-root caller can still see daemons owned by other users (postgres).
pid_alive() {
  local pid=$1 pattern=${2:-}
  [[ $pid =~ ^[0-9]+$ ]] && [[ -d /proc/$pid ]] || return 1
  # A zombie has exited already (here PID 1 may be slow to reap orphans).
  [[ $(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null) != Z ]] || return 1
  [[ -z $pattern ]] && return 0
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern"
}

read_pid() { [[ -s $1 ]] && head -n 1 "$1" | tr -dc '0-9'; }

# Waits (bounded) until `probe` succeeds. Fails early when `pid` (if given) dies.
#   wait_ready <what> <timeout-seconds> <logfile> <pid-or-empty> <probe command...>
wait_ready() {
  local what=$1 timeout=$2 logfile=$3 pid=$4
  shift 4
  local deadline=$((SECONDS + timeout))
  while ! "$@"; do
    if [[ -n $pid ]] && ! pid_alive "$pid"; then
      printf 'services: %serror: %s exited during startup (pid %s)\n' "${SVC:+$SVC: }" "$what" "$pid" >&2
      tail_log "$logfile"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      printf 'services: %serror: %s not ready after %ss\n' "${SVC:+$SVC: }" "$what" "$timeout" >&2
      tail_log "$logfile"
      return 1
    fi
    sleep 0.2
  done
}

# Sends SIGTERM (or $STOP_SIGNAL, set by `stop --kill`) to <pid>, waits up to <timeout> seconds
# for it to exit, then SIGKILLs it.
STOP_SIGNAL=TERM
stop_pid() {
  local pid=$1 timeout=${2:-30}
  pid_alive "$pid" || return 0
  kill "-$STOP_SIGNAL" "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + timeout))
  while pid_alive "$pid"; do
    if ((SECONDS >= deadline)); then
      log "pid $pid still alive after ${timeout}s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
      break
    fi
    sleep 0.1
  done
}

# Waits until nothing accepts connections on <port> any more (bounded).
wait_port_closed() {
  local port=$1 timeout=${2:-15} deadline=$((SECONDS + ${2:-15}))
  while port_open "$port"; do
    ((SECONDS >= deadline)) && { log "port $port still accepting connections after ${timeout}s"; return 1; }
    sleep 0.1
  done
}

# Describes who listens on a port (for "not managed by this checkout" messages): the process
# and, when it is one of ours, the checkout it runs from (its cwd is under <repo>/.services/).
port_owner() {
  command -v ss >/dev/null 2>&1 || return 0
  local line pid cwd
  line=$(ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'users:(([^)]*))' | head -n 1)
  [[ -n $line ]] || return 0
  pid=$(grep -o 'pid=[0-9]*' <<<"$line" | head -n 1 | cut -d= -f2)
  cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null || true)
  if [[ $cwd == */.services/* ]]; then
    echo "(pid $pid, started from ${cwd%%/.services/*})"
  else
    echo "($(grep -o '"[^"]*"' <<<"$line" | head -n 1 | tr -d '"'), pid $pid)"
  fi
}

# ---------------------------------------------------------------------------------------------
# Package installation (Debian/Ubuntu). Installs only what is missing, as root (or via sudo -n).
# A temporary /usr/sbin/policy-rc.d (exit 101) keeps the packages' maintainer scripts from
# starting system-wide daemons on the default ports; any daemon that appears anyway during
# the install is stopped again.
# ---------------------------------------------------------------------------------------------
apt_packages_install() {
  (($# == 0)) && return 0
  local sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      die "missing packages: $* (install them with: sudo apt-get install -y --no-install-recommends $*, or run as root)"
    fi
  fi
  command -v apt-get >/dev/null 2>&1 || die "missing packages: $* and no apt-get on this machine"

  local t0 out policy=/usr/sbin/policy-rc.d created_policy=0 before after
  t0=$(now_ms)
  out=$(mktemp)
  log "installing $* (apt-get; output in $out)"
  if [[ ! -e $policy ]]; then
    "${sudo[@]}" sh -c "printf '#!/bin/sh\n# temporary, created by herald scripts/services\nexit 101\n' >$policy && chmod 755 $policy"
    created_policy=1
  fi
  # Only the service accounts of the packages being installed are watched, so nobody else's
  # processes (e.g. another PostgreSQL) can be mistaken for a package-started daemon.
  local users=() u
  [[ " $* " == *" redis-server "* ]] && users+=(redis)
  [[ " $* " == *" rabbitmq-server "* ]] && users+=(rabbitmq)
  before=$(for u in "${users[@]}"; do pgrep -u "$u" 2>/dev/null || true; done | sort)

  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y
    -o DPkg::Lock::Timeout=300 --no-install-recommends install "$@")
  local rc=0
  "${apt[@]}" >"$out" 2>&1 || rc=$?
  if ((rc != 0)) && grep -qE 'Unable to locate package|has no installation candidate|404 +Not Found|Failed to fetch' "$out"; then
    log "apt-get install failed for lack of package lists; running apt-get update and retrying"
    rc=0
    { "${sudo[@]}" apt-get -q -o DPkg::Lock::Timeout=300 update && "${apt[@]}"; } >>"$out" 2>&1 || rc=$?
  fi

  after=$(for u in "${users[@]}"; do pgrep -u "$u" 2>/dev/null || true; done | sort)
  local pid
  for pid in $(comm -13 <(echo "$before") <(echo "$after")); do
    log "stopping system daemon started by the package install (pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80))"
    "${sudo[@]}" kill -TERM "$pid" 2>/dev/null || true
  done
  ((created_policy)) && "${sudo[@]}" rm -f "$policy"

  if ((rc != 0)); then
    tail_log "$out" 40
    die "apt-get install $* failed (exit $rc)"
  fi
  rm -f "$out"
  log "installed $* in $(since "$t0")"
}
