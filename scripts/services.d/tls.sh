# shellcheck shell=bash
# TLS instances for the secure-connection tests (ADR 0015), separate from the shared services on
# their own loopback ports, so nobody's tests lose their plain-text services:
#
#   postgres-tls  54379  hostssl only: `herald` by SCRAM password, `herald_cert` by client certificate
#   rabbitmq-tls  56779  AMQPS only (node herald-tls@localhost, dist 25779, own epmd 43749);
#                        a client certificate is optional but verified when presented
#   redis-tls     63849  TLS only, the default user disabled, ACL user `herald` with the password
#   kafka-tls     19142  SASL_SSL only (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN; controller 19143);
#                        a client certificate is optional but verified when presented
#
# All of them share one generated CA (openssl, EC P-256) under .services/tls/: ca.crt, server.crt
# (subjectAltName DNS:localhost only, so connecting through 127.0.0.1 fails host name verification),
# client.crt (CN herald_cert), other-ca.crt with other-client.crt (a CA nobody trusts) and `password`
# (random, the password of every `herald` user). Each instance runs the base service's own start and
# stop code (postgres.sh, rabbitmq.sh, redis.sh, kafka.sh) in a subshell with that instance's paths,
# ports and configuration; HERALD_SERVICES_PORT_OFFSET moves these ports too.

# Ports: the base service's + 50 (not a round offset, so HERALD_SERVICES_PORT_OFFSET=N of another
# checkout moves its base ports past these for every N but 50).
TLS_HOME="$SERVICES_DIR/tls"
TLS_HOME_CA="$TLS_HOME/ca.crt"
TLS_HOME_PASSWORD="$TLS_HOME/password"
TLS_SERVICES=(postgres-tls rabbitmq-tls redis-tls kafka-tls)
# Started by a bare `scripts/services up` (cheap: well under a second each, RabbitMQ's node ~5 s and
# ~140 MB). kafka-tls (a second JVM, ~7-14 s and ~330 MB) is started by the tests that need it.
TLS_DEFAULT_SERVICES=(postgres-tls rabbitmq-tls redis-tls)

PGT_PORT=$((54379 + HERALD_SERVICES_PORT_OFFSET))
RABBITT_PORT=$((56779 + HERALD_SERVICES_PORT_OFFSET))
RABBITT_DIST_PORT=$((25779 + HERALD_SERVICES_PORT_OFFSET))
RABBITT_EPMD_PORT=$((43749 + HERALD_SERVICES_PORT_OFFSET))
REDIST_PORT=$((63849 + HERALD_SERVICES_PORT_OFFSET))
KAFKAT_PORT=$((19142 + HERALD_SERVICES_PORT_OFFSET))
KAFKAT_CONTROLLER_PORT=$((19143 + HERALD_SERVICES_PORT_OFFSET))

# Empty until the material exists (the scope functions below also run for `status` and `pid`).
tls_password() { cat "$TLS_HOME_PASSWORD" 2>/dev/null || true; }

# ---------------------------------------------------------------------------------------------
# Certificates: generated once per checkout (ten years; a test CA), under a lock because the
# instances start in parallel.
# ---------------------------------------------------------------------------------------------
tls_issue() { # <name> <subject CN> <issuer> <extensions> <dir>
  local name=$1 cn=$2 issuer=$3 ext=$4 d=$5
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -subj "/CN=$cn" \
    -keyout "$d/$name.key" -out "$d/$name.csr" 2>/dev/null &&
    openssl x509 -req -in "$d/$name.csr" -CA "$d/$issuer.crt" -CAkey "$d/$issuer.key" -CAcreateserial \
      -days 3650 -out "$d/$name.crt" -extfile <(printf '%s\n' "$ext") 2>/dev/null
}

tls_generate() {
  local d="$TLS_HOME.tmp.$$" ca
  command -v openssl >/dev/null 2>&1 || die "openssl not found"
  rm -rf "$d"
  mkdir -p "$d"
  for ca in ca other-ca; do
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 3650 \
      -subj "/CN=Herald test $ca" -addext 'basicConstraints=critical,CA:TRUE' \
      -addext 'keyUsage=critical,keyCertSign,cRLSign' -keyout "$d/$ca.key" -out "$d/$ca.crt" 2>/dev/null ||
      die "openssl: cannot create the test CA"
  done
  local leaf='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment'
  tls_issue server localhost ca "$leaf
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:localhost" "$d" || die "openssl: cannot issue the server certificate"
  tls_issue client herald_cert ca "$leaf
extendedKeyUsage=clientAuth" "$d" || die "openssl: cannot issue the client certificate"
  tls_issue other-client herald_cert other-ca "$leaf
extendedKeyUsage=clientAuth" "$d" || die "openssl: cannot issue the untrusted client certificate"
  # Kafka reads a PEM keystore: the (unencrypted PKCS#8) key followed by the certificate.
  cat "$d/server.key" "$d/server.crt" >"$d/server-keystore.pem"
  openssl rand -hex 24 >"$d/password"
  rm -f "$d"/*.csr "$d"/*.srl
  chmod 600 "$d"/*.key "$d/password" "$d/server-keystore.pem"
  touch "$d/.complete"
  rm -rf "$TLS_HOME"
  mv "$d" "$TLS_HOME"
  log "generated a test CA, server and client certificates in $TLS_HOME"
}

tls_ensure_material() {
  mkdir -p "$SERVICES_DIR"
  (
    flock -w 60 9 || die "cannot lock $SERVICES_DIR/.tls.lock"
    [[ -f $TLS_HOME/.complete ]] || tls_generate
  ) 9>"$SERVICES_DIR/.tls.lock"
}

# An instance whose data was initialised with another password (the material was regenerated) is
# reset: it is a test instance, and its users are created only on a fresh data directory.
tls_reset_if_stale() { # <data dir> <marker file>
  local dir=$1 marker=$2 want
  want=$(sha256sum "$TLS_HOME_PASSWORD" | cut -c1-16)
  if [[ -d $dir && $(cat "$marker" 2>/dev/null) != "$want" ]]; then
    log "resetting $dir (initialised for other TLS material)"
    rm -rf "$dir"
  fi
  mkdir -p "$(dirname "$marker")"
  [[ -d $dir ]] || { mkdir -p "$dir" && echo "$want" >"$marker"; }
  return 0
}

# A TLS handshake (the test CA, host name localhost verified), then <payload>; prints the first
# reply bytes as hex. The pause before EOF lets the reply arrive (-no_ign_eof: then s_client exits).
tls_exchange() { # <port> <payload printf format>
  # shellcheck disable=SC2059 # the payload is a printf format on purpose (binary bytes)
  { printf "$2"; sleep 0.3; } | timeout 4 openssl s_client -quiet -no_ign_eof -connect "127.0.0.1:$1" \
    -servername localhost -verify_hostname localhost -verify_return_error -CAfile "$TLS_HOME_CA" 2>/dev/null |
    head -c 8 | od -An -tx1 | tr -d ' \n'
}

# For `env`: the material's paths (kept when already set, e.g. for external TLS services).
tls_env() {
  printf 'export TLS_DIR=%q\n' "${TLS_DIR:-$TLS_HOME}"
  printf 'export TLS_CA_FILE=%q\n' "${TLS_CA_FILE:-$TLS_HOME_CA}"
  printf 'export TLS_PASSWORD_FILE=%q\n' "${TLS_PASSWORD_FILE:-$TLS_HOME_PASSWORD}"
}

# ---------------------------------------------------------------------------------------------
# postgres-tls
# ---------------------------------------------------------------------------------------------
pgt_scope() {
  PG_PORT=$PGT_PORT
  PG_DIR="$SERVICES_DIR/postgres-tls"
  PG_DATA="$PG_DIR/data"
  PG_LOG="$PG_DIR/postgres.log"
  # Appended to the base herald.conf (later settings win): TLS on, a smaller instance.
  PG_CONF_EXTRA="ssl = on
ssl_cert_file = '$PG_DIR/tls/server.crt'
ssl_key_file = '$PG_DIR/tls/server.key'
ssl_ca_file = '$PG_DIR/tls/ca.crt'
ssl_min_protocol_version = 'TLSv1.2'
password_encryption = 'scram-sha-256'
shared_buffers = 32MB
max_connections = 100"
  # TLS required: no `host` line, so a plain-text connection finds no entry and is refused. The
  # unix socket (a private directory) and `postgres` over TLS stay trusted for the script's own
  # probes and bootstrap.
  PG_HBA="# Generated by scripts/services (TLS test instance, loopback only).
local   all all                          trust
hostssl all herald_cert 127.0.0.1/32     cert
hostssl all postgres    127.0.0.1/32     trust
hostssl all all         127.0.0.1/32     scram-sha-256"
  # Run by postgres_start after the role and database exist: the password, the certificate user.
  PG_BOOTSTRAP_EXTRA="ALTER ROLE herald PASSWORD '$(tls_password)';
SELECT 'CREATE ROLE herald_cert LOGIN SUPERUSER' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'herald_cert')\\gexec"
}

postgres-tls_var() { echo DATABASE_TLS_URL; }
postgres-tls_port() { echo "$PGT_PORT"; }
postgres-tls_url() { echo "postgres://herald@localhost:$PGT_PORT/herald?sslmode=verify-full&sslrootcert=$TLS_HOME_CA"; }
postgres-tls_packages() {
  postgres_packages
  command -v openssl >/dev/null 2>&1 || echo openssl
}
postgres-tls_pid() { (pgt_scope && postgres_pid); }
postgres-tls_probe() { (pgt_scope && postgres_probe); }
# Another checkout's instance has another CA and password: reuse a port only when ours work there.
postgres-tls_probe_reuse() {
  (pgt_scope && postgres_probe) &&
    PGPASSWORD=$(tls_password) PGCONNECT_TIMEOUT=3 psql "$(postgres-tls_url)" -qAtX -c 'select 1' >/dev/null 2>&1
}
postgres-tls_start() {
  tls_ensure_material
  (
    pgt_scope
    # The server reads its key only when it is private to the server's user.
    mkdir -p "$PG_DIR/tls"
    local f
    for f in server.crt server.key ca.crt; do install -m 600 "$TLS_HOME/$f" "$PG_DIR/tls/$f"; done
    ((EUID == 0)) && chown -R postgres: "$PG_DIR"
    postgres_start
  )
}
postgres-tls_stop() { (pgt_scope && postgres_stop); }
postgres-tls_purge() { (pgt_scope && postgres_purge); }

# ---------------------------------------------------------------------------------------------
# rabbitmq-tls
# ---------------------------------------------------------------------------------------------
rabbitt_scope() {
  RABBIT_PORT=$RABBITT_PORT
  RABBIT_DIST_PORT=$RABBITT_DIST_PORT
  RABBIT_EPMD_PORT=$RABBITT_EPMD_PORT
  RABBIT_NODE=herald-tls@localhost
  RABBIT_DIR="$SERVICES_DIR/rabbitmq-tls"
  RABBIT_LOG_DIR="$RABBIT_DIR/log"
  RABBIT_OUT="$RABBIT_DIR/rabbitmq-server.out"
  RABBIT_PIDFILE="$RABBIT_DIR/rabbitmq.pid"
  RABBIT_LAUNCHER_PIDFILE="$RABBIT_DIR/launcher.pid"
  # The base script's functions call these by name: TLS listener only, and a probe over TLS.
  rabbit_write_conf() {
    tls_reset_if_stale "$RABBIT_DIR/mnesia" "$RABBIT_DIR/.material"
    mkdir -p "$RABBIT_DIR" "$RABBIT_LOG_DIR"
    cat >"$RABBIT_DIR/rabbitmq.conf" <<CONF
# Generated by scripts/services on every start (TLS test instance, loopback only).
listeners.tcp = none
listeners.ssl.default = 127.0.0.1:$RABBIT_PORT
ssl_options.cacertfile = $TLS_HOME/ca.crt
ssl_options.certfile = $TLS_HOME/server.crt
ssl_options.keyfile = $TLS_HOME/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
loopback_users = none
default_vhost = /
default_user = herald
default_pass = $(tls_password)
default_user_tags.administrator = true
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
log.file.level = info
log.console = false
CONF
    echo '[].' >"$RABBIT_DIR/enabled_plugins"
    : >"$RABBIT_DIR/rabbitmq-env.conf"
  }
  # connection.start (a method frame, type 1) back after the protocol header, over TLS.
  rabbitmq_probe() { [[ $(tls_exchange "$RABBIT_PORT" 'AMQP\x00\x00\x09\x01') == 01* ]]; }
}

rabbitmq-tls_var() { echo AMQP_TLS_URL; }
rabbitmq-tls_port() { echo "$RABBITT_PORT"; }
rabbitmq-tls_url() { echo "amqps://herald@localhost:$RABBITT_PORT?cacertfile=$TLS_HOME_CA"; }
rabbitmq-tls_packages() {
  rabbitmq_packages
  command -v openssl >/dev/null 2>&1 || echo openssl
}
rabbitmq-tls_pid() { (rabbitt_scope && rabbitmq_pid); }
rabbitmq-tls_probe() { (rabbitt_scope && rabbitmq_probe); }
rabbitmq-tls_probe_reuse() { (rabbitt_scope && rabbitmq_probe); }
rabbitmq-tls_start() {
  tls_ensure_material
  (rabbitt_scope && rabbitmq_start)
}
rabbitmq-tls_stop() { (rabbitt_scope && rabbitmq_stop); }
rabbitmq-tls_stop_epmd() { (rabbitt_scope && rabbitmq_stop_epmd); }
rabbitmq-tls_purge() { (rabbitt_scope && rabbitmq_purge); }

# ---------------------------------------------------------------------------------------------
# redis-tls
# ---------------------------------------------------------------------------------------------
redist_scope() {
  REDIS_PORT=$REDIST_PORT
  REDIS_DIR="$SERVICES_DIR/redis-tls"
  REDIS_LOG="$REDIS_DIR/redis.log"
  REDIS_PIDFILE="$REDIS_DIR/redis.pid"
  REDIS_LISTEN="port 0
tls-port $REDIS_PORT
tls-cert-file $TLS_HOME/server.crt
tls-key-file $TLS_HOME/server.key
tls-ca-cert-file $TLS_HOME/ca.crt
tls-auth-clients optional
user default off
user herald on >$(tls_password) ~* &* +@all"
  # PONG over TLS (the test CA, host name localhost) for the ACL user.
  redis_probe() {
    timeout 3 redis-cli --tls --cacert "$TLS_HOME_CA" -h localhost -p "$REDIS_PORT" --user herald \
      --pass "$(tls_password)" --no-auth-warning ping 2>/dev/null | grep -q PONG
  }
}

redis-tls_var() { echo REDIS_TLS_URL; }
redis-tls_port() { echo "$REDIST_PORT"; }
redis-tls_url() { echo "rediss://herald@localhost:$REDIST_PORT"; }
redis-tls_packages() {
  redis_packages
  command -v openssl >/dev/null 2>&1 || echo openssl
}
redis-tls_pid() { (redist_scope && redis_pid); }
redis-tls_probe() { (redist_scope && redis_probe); }
redis-tls_probe_reuse() { (redist_scope && redis_probe); }
redis-tls_start() {
  tls_ensure_material
  (redist_scope && redis_start)
}
redis-tls_stop() { (redist_scope && redis_stop); }
redis-tls_purge() { (redist_scope && redis_purge); }

# ---------------------------------------------------------------------------------------------
# kafka-tls
# ---------------------------------------------------------------------------------------------
kafkat_scope() {
  KAFKA_PORT=$KAFKAT_PORT
  KAFKA_CONTROLLER_PORT=$KAFKAT_CONTROLLER_PORT
  KAFKA_DIR="$SERVICES_DIR/kafka-tls"
  KAFKA_DATA="$KAFKA_DIR/data"
  KAFKA_LOG_DIR="$KAFKA_DIR/logs"
  KAFKA_OUT="$KAFKA_DIR/kafka.out"
  KAFKA_PIDFILE="$KAFKA_DIR/kafka.pid"
  KAFKA_HEAP="${HERALD_KAFKA_TLS_HEAP:--Xms128m -Xmx384m}"
  # SCRAM credentials live in the cluster metadata: written when the storage is formatted.
  KAFKA_FORMAT_ARGS=(--add-scram "SCRAM-SHA-512=[name=herald,password=$(tls_password)]"
    --add-scram "SCRAM-SHA-256=[name=herald,password=$(tls_password)]")
  kafka_write_conf() {
    local pw
    pw=$(tls_password)
    tls_reset_if_stale "$KAFKA_DATA" "$KAFKA_DIR/.material"
    mkdir -p "$KAFKA_LOG_DIR"
    cat >"$KAFKA_DIR/server.properties" <<CONF
# Generated by scripts/services on every start: single-node KRaft SASL_SSL test broker, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=SASL_SSL://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
# Advertised by name: clients verify the certificate (DNS:localhost) against the advertised host.
advertised.listeners=SASL_SSL://localhost:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="herald" password="$pw" user_herald="$pw";
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$TLS_HOME/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_HOME/ca.crt
listener.name.sasl_ssl.ssl.client.auth=requested
ssl.endpoint.identification.algorithm=https
log.dirs=$KAFKA_DATA
num.partitions=2
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
CONF
  }
  # A metadata round trip over SASL_SSL with SCRAM that lists a live broker (the listener opens
  # before the broker is unfenced).
  kafka_probe() {
    port_open "$KAFKA_PORT" || return 1
    [[ -d $REPO_ROOT/node_modules/kafkajs ]] && command -v node >/dev/null 2>&1 || return 0
    (cd "$REPO_ROOT" && timeout 10 node -e '
      const fs = require("node:fs");
      const { Kafka, logLevel } = require("kafkajs");
      const [broker, ca, password] = process.argv.slice(1);
      const kafka = new Kafka({ clientId: "herald-services-probe", brokers: [broker], logLevel: logLevel.NOTHING,
        ssl: { ca: [fs.readFileSync(ca)] }, sasl: { mechanism: "scram-sha-512", username: "herald", password },
        connectionTimeout: 2000, requestTimeout: 3000, retry: { retries: 0 } });
      const admin = kafka.admin();
      admin.connect().then(() => admin.describeCluster())
        .then((c) => process.exit(c.brokers.length > 0 ? 0 : 1), () => process.exit(1));
    ' "localhost:$KAFKA_PORT" "$TLS_HOME_CA" "$(tls_password)" >/dev/null 2>&1)
  }
}

kafka-tls_var() { echo KAFKA_TLS_BROKERS; }
kafka-tls_port() { echo "$KAFKAT_PORT"; }
kafka-tls_url() { echo "localhost:$KAFKAT_PORT"; }
kafka-tls_packages() {
  kafka_packages
  command -v openssl >/dev/null 2>&1 || echo openssl
}
kafka-tls_pid() { (kafkat_scope && kafka_pid); }
kafka-tls_probe() { (kafkat_scope && kafka_probe); }
kafka-tls_probe_reuse() { (kafkat_scope && kafka_probe); }
kafka-tls_start() {
  tls_ensure_material
  (kafkat_scope && kafka_start)
}
kafka-tls_stop() { (kafkat_scope && kafka_stop); }
kafka-tls_purge() { (kafkat_scope && kafka_purge); }
