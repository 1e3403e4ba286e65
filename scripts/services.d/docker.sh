# shellcheck shell=bash
# Docker fallback -- UNTESTED (no Docker engine where this script was written and verified).
# Used only when HERALD_SERVICES_MODE=docker, or when HERALD_SERVICES_MODE is unset/auto, the
# native binaries are missing, we cannot install packages (not root, no passwordless sudo) and
# `docker info` works. Same ports, same URLs, loopback-only publishing; state lives in the
# containers (removed on stop), so `stop`/`start` do not keep data in this mode.

docker_name() { echo "herald-svc-$1"; }

docker_available() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

docker_mode() {
  case ${HERALD_SERVICES_MODE:-auto} in
    docker) return 0 ;;
    native) return 1 ;;
  esac
  [[ -n $("${SVC}_packages") ]] || return 1
  ((EUID == 0)) && return 1
  command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && return 1
  docker_available
}

docker_running() {
  command -v docker >/dev/null 2>&1 || return 1
  [[ -n $(docker ps -q --filter "name=^$(docker_name "$1")\$" 2>/dev/null) ]]
}

docker_start() {
  local s=$1 name args=()
  name=$(docker_name "$s")
  docker rm -f "$name" >/dev/null 2>&1 || true
  # shellcheck disable=SC2054 # commas inside values (broker,controller), not separators
  case $s in
    postgres) args=(-p "127.0.0.1:$PG_PORT:5432" -e POSTGRES_USER=herald -e POSTGRES_DB=herald
      -e POSTGRES_HOST_AUTH_METHOD=trust postgres:15-alpine
      -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300) ;;
    rabbitmq) args=(-p "127.0.0.1:$RABBIT_PORT:5672" -e RABBITMQ_DEFAULT_USER=herald
      -e RABBITMQ_DEFAULT_PASS=herald rabbitmq:3.13-alpine) ;;
    redis) args=(-p "127.0.0.1:$REDIS_PORT:6379" redis:7-alpine redis-server --save "") ;;
    kafka) args=(-p "127.0.0.1:$KAFKA_PORT:$KAFKA_PORT" -e KAFKA_NODE_ID=1
      -e KAFKA_PROCESS_ROLES=broker,controller
      -e KAFKA_LISTENERS="PLAINTEXT://0.0.0.0:$KAFKA_PORT,CONTROLLER://localhost:$KAFKA_CONTROLLER_PORT"
      -e KAFKA_ADVERTISED_LISTENERS="PLAINTEXT://127.0.0.1:$KAFKA_PORT"
      -e KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER
      -e KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
      -e KAFKA_CONTROLLER_QUORUM_VOTERS="1@localhost:$KAFKA_CONTROLLER_PORT"
      -e KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1 -e KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1
      -e KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1 -e KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0
      -e KAFKA_NUM_PARTITIONS=4 apache/kafka:3.9.1) ;;
    *) die "no Docker variant of $s (the TLS instances run natively only)" ;;
  esac
  log "starting docker container $name (untested path)"
  docker run -d --rm --name "$name" "${args[@]}" >/dev/null || die "docker run failed"
  wait_ready "$s (docker)" 120 /dev/null "" "${s}_probe" || { docker logs --tail 30 "$name" >&2; die "$s container not ready"; }
}

docker_stop() { docker rm -f "$(docker_name "$1")" >/dev/null 2>&1 || true; }
