# shellcheck shell=bash
# Clusters for the high-availability tests (ADR 0037, docs/guides/high-availability.md), started only
# on request (`scripts/services up rabbitmq-cluster kafka-cluster postgres-ha`), never by a bare `up`:
#
#   rabbitmq-cluster  3 RabbitMQ nodes herald-c1..3@localhost clustered with `rabbitmqctl join_cluster`,
#                     AMQP 56701..56703, Erlang distribution 25701..25703, one epmd on 43701, a shared
#                     Erlang cookie in .services/rabbitmq-cluster/cookie; pause_minority on a partition.
#                     Quorum queues get a member on every node (RabbitMQ's default initial group size
#                     is the cluster's size).
#   kafka-cluster     3 KRaft nodes, each broker + controller (node.id 1..3, one controller quorum),
#                     brokers 19064..19066, controllers 19074..19076; default.replication.factor=3,
#                     min.insync.replicas=2, internal topics replicated 3 with min ISR 2.
#   postgres-ha       a primary and a synchronous streaming standby (pg_basebackup -R, application_name
#                     herald_standby, synchronous_standby_names on the primary, synchronous_commit=on)
#                     on 54301 and 54302, behind a re-pointable TCP proxy on 54300 (scripts/ha-proxy.mjs):
#                     the database URL Herald uses. `failover postgres-ha` kills the primary (immediate
#                     mode), promotes the standby and re-points the proxy; the next `up postgres-ha`
#                     rebuilds the old primary as the new standby.
#
# Ports sit just below the base services' (base - 29 .. base - 26, never a multiple of ten away from
# them or the TLS instances', so no two round HERALD_SERVICES_PORT_OFFSETs collide), moved by the
# offset like every other port. `node stop|start [--kill] <cluster> <n>` stops or starts one node.
# Each node runs the base service's own start and stop code (rabbitmq.sh, kafka.sh, postgres.sh) in a
# subshell with that node's paths and ports, as the TLS instances do (tls.sh).
#
# `partition <cluster> <n>` cuts node n of rabbitmq-cluster or kafka-cluster off from its two peers (ADR
# 0038): every broker node runs with a group id of its own (NODE_GID: root's uid kept, only the gid
# differs), and an nftables table `herald_p<offset>_<cluster>_<n>` marks each connection between node n
# and a peer (matched by the sending socket's gid and the peer's listening port) and drops every packet
# of a marked connection, both ways. Clients (gid 0: Herald, the tests, rabbitmqctl) still reach every
# node: the partition is between the nodes, as when a switch isolates one node's replication links, and
# what the node does about it (pause_minority; a fenced Kafka broker) is what clients see; with
# `--clients` the node's client port also refuses them (the clients are on the majority's side). `heal`
# deletes the table and waits until the cluster is whole again.

CLUSTER_SERVICES=(rabbitmq-cluster kafka-cluster postgres-ha)

RC_AMQP_BASE=$((56700 + HERALD_SERVICES_PORT_OFFSET)) # node n: + n
RC_DIST_BASE=$((25700 + HERALD_SERVICES_PORT_OFFSET))
RC_EPMD_PORT=$((43701 + HERALD_SERVICES_PORT_OFFSET))
RC_DIR="$SERVICES_DIR/rabbitmq-cluster"
KC_BROKER_BASE=$((19063 + HERALD_SERVICES_PORT_OFFSET))
KC_CONTROLLER_BASE=$((19073 + HERALD_SERVICES_PORT_OFFSET))
KC_DIR="$SERVICES_DIR/kafka-cluster"
PGHA_PROXY_PORT=$((54300 + HERALD_SERVICES_PORT_OFFSET))
PGHA_BASE=$((54300 + HERALD_SERVICES_PORT_OFFSET)) # node n: + n
PGHA_DIR="$SERVICES_DIR/postgres-ha"
PGHA_STANDBY_NAME=herald_standby

# The group id node <n> of <cluster> runs with (unique per port offset, cluster and node).
cluster_node_gid() { # <cluster> <n>
  local c
  case $1 in rabbitmq-cluster) c=1 ;; kafka-cluster) c=2 ;; *) c=3 ;; esac
  echo $((60000 + HERALD_SERVICES_PORT_OFFSET + 10 * c + $2))
}

cluster_nodes() { case $1 in postgres-ha) echo 1 2 ;; *) echo 1 2 3 ;; esac; }
is_cluster() { [[ " ${CLUSTER_SERVICES[*]} " == *" $1 "* ]]; }

# RSS of a process and its children, in MB (for `status`).
rss_mb() {
  local pid=$1 kb
  kb=$(ps -o rss= --ppid "$pid" -p "$pid" 2>/dev/null | awk '{s += $1} END {print s + 0}')
  echo $((kb / 1024))
}

# The pids of the live nodes of <prefix> (rc, kc, pgha) among <nodes…>, on one line; false when none lives.
cluster_pids() {
  local prefix=$1 n pid pids=()
  shift
  for n in "$@"; do
    if pid=$("${prefix}_node_pid" "$n"); then pids+=("$pid"); fi
  done
  ((${#pids[@]})) && echo "${pids[*]}"
}

# Starts the nodes of <prefix> among <nodes…> that are not running, all at once (a clustered node waits
# for its peers at boot); false when one of them did not start.
cluster_start_missing() {
  local prefix=$1 n pids=() failed=0
  shift
  for n in "$@"; do
    if ! "${prefix}_node_pid" "$n" >/dev/null; then
      "${prefix}_node_start" "$n" &
      pids+=($!)
    fi
  done
  for n in "${pids[@]}"; do wait "$n" || failed=1; done
  ((failed == 0))
}

# One `status` line per node: <label> <prefix> <port of node 0> <nodes…>.
cluster_status_lines() {
  local label=$1 prefix=$2 base=$3 n pid state
  shift 3
  for n in "$@"; do
    if pid=$("${prefix}_node_pid" "$n"); then
      if "${prefix}_node_probe" "$n"; then state=running; else state=starting; fi
      printf '%-13s %-9s port %-6s pid %s  rss %s MB\n' "$label/$n" "$state" "$((base + n))" "$pid" "$(rss_mb "$pid")"
    else
      printf '%-13s stopped   port %-6s\n' "$label/$n" "$((base + n))"
    fi
  done
}

# For `env`: what the tests need beyond the three URLs.
clusters_env() {
  local n urls=()
  for n in 1 2 3; do urls+=("amqp://herald:herald@127.0.0.1:$((RC_AMQP_BASE + n))"); done
  printf 'export HERALD_HA_RABBITMQ_NODES=%q\n' "herald-c1@localhost,herald-c2@localhost,herald-c3@localhost"
  urls=()
  for n in 1 2; do urls+=("postgres://herald@127.0.0.1:$((PGHA_BASE + n))/herald"); done
  printf 'export HERALD_HA_PG_NODE_URLS=%q\n' "$(IFS=,; echo "${urls[*]}")"
}

# ---------------------------------------------------------------------------------------------
# rabbitmq-cluster
# ---------------------------------------------------------------------------------------------
eval "$(declare -f rabbit_write_conf | sed '1s/rabbit_write_conf/rc_base_write_conf/')"

rc_scope() { # <node>
  local n=$1
  RABBIT_PORT=$((RC_AMQP_BASE + n))
  RABBIT_DIST_PORT=$((RC_DIST_BASE + n))
  RABBIT_EPMD_PORT=$RC_EPMD_PORT
  RABBIT_NODE=herald-c$n@localhost
  RABBIT_DIR="$RC_DIR/node$n"
  RABBIT_LOG_DIR="$RABBIT_DIR/log"
  RABBIT_OUT="$RABBIT_DIR/rabbitmq-server.out"
  RABBIT_PIDFILE="$RABBIT_DIR/rabbitmq.pid"
  RABBIT_LAUNCHER_PIDFILE="$RABBIT_DIR/launcher.pid"
  NODE_GID=$(cluster_node_gid rabbitmq-cluster "$n")
  # A peer that stops answering (a partition: no RST, no FIN) is down after 10-12.5 s instead of 60-75.
  RABBIT_EXTRA_ERL_ARGS="-kernel net_ticktime 10"
  rabbit_write_conf() {
    rc_base_write_conf
    cat >>"$RABBIT_DIR/rabbitmq.conf" <<CONF
# Cluster node (scripts/services.d/clusters.sh): a minority side of a partition pauses itself.
cluster_partition_handling = pause_minority
CONF
    # The shared cookie: the node and the CLI tools read it from HOME (= the node's directory).
    install -m 400 "$RC_DIR/cookie" "$RABBIT_DIR/.erlang.cookie"
  }
}

rc_ensure_cookie() {
  mkdir -p "$RC_DIR"
  [[ -s $RC_DIR/cookie ]] || (umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$RC_DIR/cookie")
}

rc_node_pid() { (rc_scope "$1" && rabbitmq_pid); }
rc_node_probe() { (rc_scope "$1" && rabbitmq_probe); }
rc_node_start() { (SVC="rabbitmq-cluster/$1" && rc_scope "$1" && rabbitmq_start); }
rc_node_stop() { (SVC="rabbitmq-cluster/$1" && rc_scope "$1" && rabbitmq_stop); }

rabbitmq-cluster_var() { echo HERALD_HA_AMQP_URLS; }
rabbitmq-cluster_port() { echo $((RC_AMQP_BASE + 1)); }
rabbitmq-cluster_url() {
  local n urls=()
  for n in 1 2 3; do urls+=("amqp://herald:herald@127.0.0.1:$((RC_AMQP_BASE + n))"); done
  (IFS=,; echo "${urls[*]}")
}
rabbitmq-cluster_packages() { rabbitmq_packages; }
rabbitmq-cluster_pid() { cluster_pids rc 1 2 3; }
rabbitmq-cluster_probe() { rc_node_probe 1 && rc_node_probe 2 && rc_node_probe 3; }
rabbitmq-cluster_probe_reuse() { return 1; }

rabbitmq-cluster_start() {
  local t0 n
  t0=$(now_ms)
  rc_ensure_cookie
  cluster_unpartition_all rabbitmq-cluster
  if [[ ! -f $RC_DIR/.clustered ]]; then
    # First boot: node 1 alone, then 2 and 3, each joining node 1 (their fresh state is reset).
    rc_node_pid 1 >/dev/null || rc_node_start 1
    cluster_start_missing rc 2 3 || die "a node did not start (logs under $RC_DIR)"
    for n in 2 3; do
      log "node $n joins herald-c1@localhost"
      (
        rc_scope "$n"
        rabbit_ctl stop_app &&
          rabbit_ctl join_cluster herald-c1@localhost &&
          rabbit_ctl start_app
      ) >>"$RC_DIR/join.log" 2>&1 || { tail_log "$RC_DIR/join.log"; die "node $n could not join the cluster"; }
    done
    touch "$RC_DIR/.clustered"
  else
    cluster_start_missing rc 1 2 3 || die "a node did not start (logs under $RC_DIR)"
  fi
  wait_ready "RabbitMQ cluster" 120 "$RC_DIR/node1/rabbitmq-server.out" "" rabbitmq-cluster_probe ||
    die "the cluster's nodes do not all answer"
  log "3 nodes up in $(since "$t0")"
}

rabbitmq-cluster_stop() {
  local n
  cluster_unpartition_all rabbitmq-cluster
  for n in 3 2 1; do rc_node_pid "$n" >/dev/null && rc_node_stop "$n"; done
  return 0
}
rabbitmq-cluster_stop_epmd() { (rc_scope 1 && rabbitmq_stop_epmd); }
rabbitmq-cluster_purge() { rm -rf "$RC_DIR"; }
rabbitmq-cluster_status() { cluster_status_lines rabbitmq-c rc "$RC_AMQP_BASE" 1 2 3; }

# ---------------------------------------------------------------------------------------------
# kafka-cluster
# ---------------------------------------------------------------------------------------------
kc_scope() { # <node>
  local n=$1
  KAFKA_PORT=$((KC_BROKER_BASE + n))
  KAFKA_CONTROLLER_PORT=$((KC_CONTROLLER_BASE + n))
  KAFKA_DIR="$KC_DIR/node$n"
  KAFKA_DATA="$KAFKA_DIR/data"
  KAFKA_LOG_DIR="$KAFKA_DIR/logs"
  KAFKA_OUT="$KAFKA_DIR/kafka.out"
  KAFKA_PIDFILE="$KAFKA_DIR/kafka.pid"
  KAFKA_HEAP="${HERALD_KAFKA_CLUSTER_HEAP:--Xms128m -Xmx320m}"
  KAFKA_CLUSTER_ID=$(cat "$KC_DIR/cluster-id" 2>/dev/null || true)
  KAFKA_NODE_ID=$n
  NODE_GID=$(cluster_node_gid kafka-cluster "$n")
  KAFKA_VOTERS="1@127.0.0.1:$((KC_CONTROLLER_BASE + 1)),2@127.0.0.1:$((KC_CONTROLLER_BASE + 2)),3@127.0.0.1:$((KC_CONTROLLER_BASE + 3))"
  KAFKA_REPLICAS=3
  KAFKA_MIN_ISR=2
}

kc_node_pid() { (kc_scope "$1" && kafka_pid); }
kc_node_probe() { (kc_scope "$1" && kafka_probe); }
kc_node_start() { (SVC="kafka-cluster/$1" && kc_scope "$1" && kafka_start); }
kc_node_stop() { (SVC="kafka-cluster/$1" && kc_scope "$1" && kafka_stop); }

kafka-cluster_var() { echo HERALD_HA_KAFKA_BROKERS; }
kafka-cluster_port() { echo $((KC_BROKER_BASE + 1)); }
kafka-cluster_url() { echo "127.0.0.1:$((KC_BROKER_BASE + 1)),127.0.0.1:$((KC_BROKER_BASE + 2)),127.0.0.1:$((KC_BROKER_BASE + 3))"; }
kafka-cluster_packages() { kafka_packages; }
kafka-cluster_pid() { cluster_pids kc 1 2 3; }
kafka-cluster_probe() { kc_node_probe 1 && kc_node_probe 2 && kc_node_probe 3; }
kafka-cluster_probe_reuse() { return 1; }

kafka-cluster_start() {
  local t0
  t0=$(now_ms)
  mkdir -p "$KC_DIR"
  [[ -s $KC_DIR/cluster-id ]] || head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' >"$KC_DIR/cluster-id"
  kafka_fetch_jars # once, before the three nodes start at once
  cluster_unpartition_all kafka-cluster
  # The controllers need a majority to elect a leader, and a broker is ready only then: all at once.
  cluster_start_missing kc 1 2 3 || die "a node did not start (logs under $KC_DIR)"
  log "3 nodes up in $(since "$t0")"
}

# All at once: the last broker of a sequential stop has no controller majority left to shut down under
# (it waits for one until SIGKILL). Even at once, the last node may be left so: 15 s, then SIGKILL (its
# logs are recovered at the next start, like after a crash).
kafka-cluster_stop() {
  local n pids=()
  cluster_unpartition_all kafka-cluster
  for n in 1 2 3; do
    if kc_node_pid "$n" >/dev/null; then
      KAFKA_STOP_TIMEOUT=15 kc_node_stop "$n" &
      pids+=($!)
    fi
  done
  for n in "${pids[@]}"; do wait "$n" || true; done
}
kafka-cluster_purge() { rm -rf "$KC_DIR"; }
kafka-cluster_status() { cluster_status_lines kafka-c kc "$KC_BROKER_BASE" 1 2 3; }

# ---------------------------------------------------------------------------------------------
# postgres-ha
# ---------------------------------------------------------------------------------------------
pgha_primary() { cat "$PGHA_DIR/primary" 2>/dev/null || echo 1; }
pgha_other() { if (($1 == 1)); then echo 2; else echo 1; fi; }
pgha_node_port() { echo $((PGHA_BASE + $1)); }

# <node> [synchronous standby names]: the primary names its standby once the standby streams; a
# standby (and a primary alone) names none, or every commit would wait for a standby that is not there.
pgha_scope() {
  local n=$1 sync=${2:-}
  PG_PORT=$((PGHA_BASE + n))
  PG_DIR="$PGHA_DIR/node$n"
  PG_DATA="$PG_DIR/data"
  PG_LOG="$PG_DIR/postgres.log"
  PG_CONF_EXTRA="# postgres-ha node $n (scripts/services.d/clusters.sh): streaming replication, synchronous commit.
synchronous_commit = on
synchronous_standby_names = '$sync'
wal_level = replica
max_wal_senders = 10
wal_keep_size = 256MB
hot_standby = on
shared_buffers = 32MB
max_connections = 200"
  PG_HBA="# Generated by scripts/services (postgres-ha node, loopback only).
local all         all              trust
host  all         all 127.0.0.1/32 trust
local replication all              trust
host  replication all 127.0.0.1/32 trust"
}

pgha_node_pid() { (pgha_scope "$1" && postgres_pid); }
pgha_node_probe() { (pgha_scope "$1" && postgres_probe); }
pgha_node_start() { (SVC="postgres-ha/$1" && pgha_scope "$1" && postgres_start); }
pgha_node_stop() { (SVC="postgres-ha/$1" && pgha_scope "$1" && postgres_stop); }
pgha_psql() { # <node> <sql>
  local bin
  bin=$(pg_bindir) || bin=/usr/bin
  "$bin/psql" -h 127.0.0.1 -p "$(pgha_node_port "$1")" -U postgres -d postgres -qAtX -c "$2"
}

# Writes the node's configuration for <sync names> and reloads it.
pgha_set_sync() { # <node> <names>
  (
    pgha_scope "$1" "$2"
    pg_write_conf
    as_pg "$(pg_bindir)/pg_ctl" -D "$PG_DATA" -s reload >>"$PG_LOG" 2>&1
  ) || die "could not reload node $1"
}

# A fresh standby of <primary> in node <n>'s directory (its old data, if any, is discarded).
pgha_make_standby() { # <n> <primary>
  local n=$1 p=$2
  (
    SVC="postgres-ha/$n"
    pgha_scope "$n"
    local bin
    bin=$(pg_bindir) || die "PostgreSQL binaries not found"
    log "base backup of node $p into $PG_DATA"
    rm -rf "$PG_DATA"
    mkdir -p "$PG_DIR"
    ((EUID == 0)) && chown postgres: "$PG_DIR"
    pg_ensure_traversable
    if ! as_pg "$bin/pg_basebackup" -D "$PG_DATA" -h 127.0.0.1 -p "$(pgha_node_port "$p")" -U postgres \
      -R -X stream -c fast --no-sync >"$PG_DIR/basebackup.log" 2>&1; then
      tail_log "$PG_DIR/basebackup.log"
      die "pg_basebackup failed"
    fi
    # The name synchronous_standby_names refers to (later lines of postgresql.auto.conf win).
    as_pg sh -c "echo \"primary_conninfo = 'host=127.0.0.1 port=$(pgha_node_port "$p") user=postgres application_name=$PGHA_STANDBY_NAME'\" >>'$PG_DATA/postgresql.auto.conf'"
    rm -f "$PG_DIR/needs-rebuild"
  )
}

pgha_proxy_pid() {
  local pid
  pid=$(read_pid "$PGHA_DIR/proxy.pid") || return 1
  pid_alive "$pid" ha-proxy.mjs && echo "$pid"
}

# Points the proxy at <node> (a running proxy drops its open connections).
pgha_point_proxy() { # <node>
  local port pid
  port=$(pgha_node_port "$1")
  mkdir -p "$PGHA_DIR"
  [[ $(cat "$PGHA_DIR/proxy.target" 2>/dev/null) == "$port" ]] && return 0
  echo "$port" >"$PGHA_DIR/proxy.target"
  if pid=$(pgha_proxy_pid); then
    kill -HUP "$pid"
    log "proxy :$PGHA_PROXY_PORT now forwards to node $1 (:$port)"
  fi
}

pgha_proxy_start() {
  local pid deadline
  pgha_proxy_pid >/dev/null && return 0
  command -v node >/dev/null 2>&1 || die "node not found (the postgres-ha proxy is scripts/ha-proxy.mjs)"
  rm -f "$PGHA_DIR/proxy.pid"
  (
    cd "$PGHA_DIR" || exit 1
    exec setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PGHA_DIR/proxy.pid" \
      nohup node "$REPO_ROOT/scripts/ha-proxy.mjs" "$PGHA_PROXY_PORT" "$PGHA_DIR/proxy.target" \
      </dev/null >>"$PGHA_DIR/proxy.log" 2>&1
  ) &
  deadline=$((SECONDS + 10))
  until port_open "$PGHA_PROXY_PORT"; do
    ((SECONDS < deadline)) || { tail_log "$PGHA_DIR/proxy.log"; die "the proxy did not start"; }
    sleep 0.1
  done
  pid=$(pgha_proxy_pid) || die "the proxy did not start"
  log "proxy on 127.0.0.1:$PGHA_PROXY_PORT (pid $pid)"
}

postgres-ha_var() { echo HERALD_HA_DATABASE_URL; }
postgres-ha_port() { echo "$PGHA_PROXY_PORT"; }
postgres-ha_url() { echo "postgres://herald@127.0.0.1:$PGHA_PROXY_PORT/herald"; }
postgres-ha_packages() { postgres_packages; }
postgres-ha_pid() {
  local pids
  pids="$(cluster_pids pgha 1 2) $(pgha_proxy_pid)"
  [[ $pids != " " ]] && echo "$pids"
}
# Both nodes answer, the proxy reaches the primary, and the primary has its synchronous standby.
postgres-ha_probe() {
  local p
  p=$(pgha_primary)
  pgha_node_probe 1 && pgha_node_probe 2 && pgha_proxy_pid >/dev/null &&
    [[ $(cat "$PGHA_DIR/proxy.target" 2>/dev/null) == "$(pgha_node_port "$p")" ]] &&
    [[ $(pgha_psql "$p" "select count(*) from pg_stat_replication where application_name = '$PGHA_STANDBY_NAME' and sync_state = 'sync'" 2>/dev/null) == 1 ]]
}
postgres-ha_probe_reuse() { return 1; }

postgres-ha_start() {
  local t0 p s deadline
  t0=$(now_ms)
  mkdir -p "$PGHA_DIR"
  p=$(pgha_primary)
  s=$(pgha_other "$p")
  echo "$p" >"$PGHA_DIR/primary"
  # The primary first, naming no standby yet (its bootstrap commits must not wait for one).
  if ! pgha_node_pid "$p" >/dev/null; then
    [[ -f $PGHA_DIR/node$p/needs-rebuild ]] && die "node $p is marked for a rebuild but is the primary; purge postgres-ha"
    pgha_node_start "$p"
  fi
  [[ $(pgha_psql "$p" 'select pg_is_in_recovery()') == f ]] || die "node $p should be the primary but is in recovery"
  pgha_point_proxy "$p"
  pgha_proxy_start
  if ! pgha_node_pid "$s" >/dev/null; then
    if [[ -f $PGHA_DIR/node$s/needs-rebuild || ! -s $PGHA_DIR/node$s/data/PG_VERSION ]]; then
      pgha_make_standby "$s" "$p"
    else
      # Its data may come from a run at another HERALD_SERVICES_PORT_OFFSET: follow this run's primary.
      as_pg sed -i -E "/^primary_conninfo/s/port=[0-9]+/port=$(pgha_node_port "$p")/" \
        "$PGHA_DIR/node$s/data/postgresql.auto.conf"
    fi
    pgha_node_start "$s"
  fi
  deadline=$((SECONDS + 60))
  until [[ $(pgha_psql "$p" "select count(*) from pg_stat_replication where application_name = '$PGHA_STANDBY_NAME' and state = 'streaming'" 2>/dev/null) == 1 ]]; do
    ((SECONDS < deadline)) || die "node $s does not stream from node $p"
    sleep 0.2
  done
  pgha_set_sync "$p" "$PGHA_STANDBY_NAME"
  wait_ready "postgres-ha" 30 "$PGHA_DIR/node$p/postgres.log" "" postgres-ha_probe || die "not ready"
  log "primary node $p (:$(pgha_node_port "$p")), synchronous standby node $s, proxy :$PGHA_PROXY_PORT; up in $(since "$t0")"
}

postgres-ha_stop() {
  local pid n
  if pid=$(pgha_proxy_pid); then stop_pid "$pid" 10; fi
  rm -f "$PGHA_DIR/proxy.pid"
  # The standby first: a primary stopping with its standby gone has nothing to wait for.
  for n in "$(pgha_other "$(pgha_primary)")" "$(pgha_primary)"; do
    pgha_node_pid "$n" >/dev/null && pgha_node_stop "$n"
  done
  return 0
}
postgres-ha_purge() { rm -rf "$PGHA_DIR"; }
postgres-ha_status() {
  local n pid state role p
  p=$(pgha_primary)
  for n in 1 2; do
    if ((n == p)); then role=primary; else role=standby; fi
    if pid=$(pgha_node_pid "$n"); then
      if pgha_node_probe "$n"; then state=running; else state=starting; fi
      printf '%-13s %-9s port %-6s pid %s  %s  rss %s MB\n' "postgres-ha/$n" "$state" "$(pgha_node_port "$n")" \
        "$pid" "$role" "$(rss_mb "$pid")"
    else
      printf '%-13s stopped   port %-6s %s\n' "postgres-ha/$n" "$(pgha_node_port "$n")" "$role"
    fi
  done
  if pid=$(pgha_proxy_pid); then
    printf '%-13s running   port %-6s pid %s  -> :%s  rss %s MB\n' "postgres-ha/p" "$PGHA_PROXY_PORT" "$pid" \
      "$(cat "$PGHA_DIR/proxy.target" 2>/dev/null)" "$(rss_mb "$pid")"
  else
    printf '%-13s stopped   port %-6s\n' "postgres-ha/p" "$PGHA_PROXY_PORT"
  fi
}

# `failover postgres-ha`: what a managed database does when its primary dies. The primary is stopped
# in immediate mode (a crash: no shutdown checkpoint, connections cut), the synchronous standby is
# promoted, and the proxy is re-pointed at it. The old primary is marked for a rebuild: the next
# `up postgres-ha` makes it the new standby (a fresh base backup) and names it synchronous again.
postgres-ha_failover() {
  local p s t0 bin
  p=$(pgha_primary)
  s=$(pgha_other "$p")
  t0=$(now_ms)
  pgha_node_pid "$s" >/dev/null || die "the standby (node $s) is not running: nothing to promote"
  [[ $(pgha_psql "$s" 'select pg_is_in_recovery()') == t ]] || die "node $s is not a standby"
  STOP_SIGNAL=KILL
  if pgha_node_pid "$p" >/dev/null; then pgha_node_stop "$p"; fi
  STOP_SIGNAL=TERM
  touch "$PGHA_DIR/node$p/needs-rebuild"
  bin=$(pg_bindir) || die "PostgreSQL binaries not found"
  (
    SVC="postgres-ha/$s"
    pgha_scope "$s"
    pg_write_conf # no synchronous standby: none is left
    as_pg "$bin/pg_ctl" -D "$PG_DATA" -s -w -t 60 promote >>"$PG_LOG" 2>&1
  ) || die "could not promote node $s"
  echo "$s" >"$PGHA_DIR/primary"
  pgha_point_proxy "$s"
  log "failover: node $p stopped (immediate), node $s promoted, proxy re-pointed in $(since "$t0")"
}

# ---------------------------------------------------------------------------------------------
# partition / heal (ADR 0038)
# ---------------------------------------------------------------------------------------------
partition_table() { echo "herald_p${HERALD_SERVICES_PORT_OFFSET}_${1%-cluster}_$2"; } # <cluster> <n>
partition_mark() { printf '0x%x' $((0x4e000000 + HERALD_SERVICES_PORT_OFFSET * 16 + $2)); }

partition_ensure_nft() { command -v nft >/dev/null 2>&1 || apt_packages_install nftables; }

# The peers' listening ports node <n> connects to, and node <n>'s own that they connect to.
partition_ports() { # <cluster> <n> -> "<own ports, comma-separated> <peer ports>"
  local m own=() peers=()
  for m in 1 2 3; do
    if [[ $1 == rabbitmq-cluster ]]; then
      if ((m == $2)); then own+=($((RC_DIST_BASE + m))); else peers+=($((RC_DIST_BASE + m))); fi
    else
      if ((m == $2)); then
        own+=($((KC_BROKER_BASE + m)) $((KC_CONTROLLER_BASE + m)))
      else
        peers+=($((KC_BROKER_BASE + m)) $((KC_CONTROLLER_BASE + m)))
      fi
    fi
  done
  echo "$(IFS=,; echo "${own[*]}") $(IFS=,; echo "${peers[*]}")"
}

# The node's process runs with its group id (a node started before partitions existed does not).
partition_check_gid() { # <cluster> <n> <prefix>
  local pid gid
  pid=$("${3}_node_pid" "$2") || die "$1 node $2 is not running"
  gid=$(awk '/^Gid:/ {print $2}' "/proc/$pid/status")
  [[ $gid == "$(cluster_node_gid "$1" "$2")" ]] ||
    die "$1 node $2 runs with gid $gid, not $(cluster_node_gid "$1" "$2"): restart the cluster (down, then up) to partition it"
}

# <cluster> <n> [clients]: with `clients`, the node's client port (AMQP, Kafka broker) refuses everyone
# else too (the clients are on the majority's side); rabbitmqctl still reaches it.
cluster_partition() {
  local cluster=$1 n=$2 clients=${3:-} prefix own peers m peer_gids=() table mark client_rule="" gid
  case $cluster in rabbitmq-cluster) prefix=rc ;; kafka-cluster) prefix=kc ;; esac
  partition_ensure_nft
  partition_check_gid "$cluster" "$n" "$prefix"
  read -r own peers < <(partition_ports "$cluster" "$n")
  for m in 1 2 3; do ((m == n)) || peer_gids+=("$(cluster_node_gid "$cluster" "$m")"); done
  table=$(partition_table "$cluster" "$n")
  mark=$(partition_mark "$cluster" "$n")
  gid=$(cluster_node_gid "$cluster" "$n")
  if [[ -n $clients ]]; then
    if [[ $cluster == rabbitmq-cluster ]]; then m=$((RC_AMQP_BASE + n)); else m=$((KC_BROKER_BASE + n)); fi
    # Refused rather than silent: a client learns at its next packet (a reset), as from a router that
    # knows the node unreachable. Silently dropped, kafkajs clients wait out 4-6 request timeouts
    # (10 s each) on a leader that never answers before they refresh their metadata (ADR 0038).
    client_rule="meta skgid != $gid tcp dport $m reject with tcp reset
    meta skgid $gid tcp sport $m reject with tcp reset"
  fi
  # Conntrack marks the connection on the first packet either side sends over it (an established
  # connection included), and every packet of a marked connection is dropped: both directions stop.
  nft -f - <<NFT || die "nft refused the partition's rules"
table inet $table {
  chain output {
    type filter hook output priority 0; policy accept;
    meta skgid $gid tcp dport { $peers } ct mark set $mark
    meta skgid { $(IFS=,; echo "${peer_gids[*]}") } tcp dport { $own } ct mark set $mark
    $client_rule
    ct mark $mark drop
  }
}
NFT
  log "$cluster node $n partitioned from its peers${clients:+ and clients} (nftables table $table)"
}

# Removes node <n>'s partition (no wait): `down`, `up` and `heal` leave no rule behind.
cluster_unpartition() { # <cluster> <n>
  local table
  table=$(partition_table "$1" "$2")
  command -v nft >/dev/null 2>&1 || return 0
  nft list table inet "$table" >/dev/null 2>&1 || return 1
  nft delete table inet "$table"
}
cluster_unpartition_all() { # <cluster>
  local n
  for n in 1 2 3; do cluster_unpartition "$1" "$n" || true; done
}

# No node of rabbitmq-cluster reports a partition, and all three run the rabbit app (a paused node
# does not).
rc_whole() {
  local status
  status=$( (rc_scope 1 && rabbit_ctl cluster_status --formatter json) 2>/dev/null) || return 1
  node -e '
    const s = JSON.parse(process.argv[1]);
    const ok = (s.running_nodes ?? []).length === 3 && Object.keys(s.partitions ?? {}).length === 0;
    process.exit(ok ? 0 : 1);' "$status" && rc_node_probe 1 && rc_node_probe 2 && rc_node_probe 3
}

# No partition of any topic is under-replicated (node <n> caught up and is back in every ISR).
kc_whole() { (cd "$REPO_ROOT" && node scripts/ha-kafka-whole.mjs "$(kafka-cluster_url)"); }

cluster_heal() { # <cluster> <n>
  local cluster=$1 n=$2 t0 deadline
  t0=$(now_ms)
  cluster_unpartition "$cluster" "$n" || log "$cluster node $n was not partitioned"
  deadline=$((SECONDS + 120))
  case $cluster in
    rabbitmq-cluster) until rc_whole; do ((SECONDS < deadline)) || die "rabbitmq-cluster not whole 120 s after the heal"; sleep 0.5; done ;;
    kafka-cluster) until kc_whole; do ((SECONDS < deadline)) || die "kafka-cluster has under-replicated partitions 120 s after the heal"; sleep 1; done ;;
  esac
  log "$cluster node $n healed; the cluster is whole again in $(since "$t0")"
}
