#!/usr/bin/env bash
# `npm test`: every vitest tier, in the order and concurrency the suite needs (vitest.config.ts says
# why each project exists):
#
#   unit + integration + integration-isolated   files three at a time
#   serial                                       one file at a time (fixed queue names, broker stops)
#   browser, then browser-sms                    Chromium against `herald api` and the roles
#   ha                                           the clusters' tests (ADR 0037), one file at a time
#
# The ha tier needs its own services (3 RabbitMQ nodes, 3 Kafka brokers, a PostgreSQL pair: ~1.6 GB,
# 65-90 s to start) and touches none of the single-node ones, and its tests mostly wait for nodes to
# die and come back. So the clusters start in the background while the first tier runs, and the ha
# tier runs beside the serial and browser tiers; its output is printed when it ends, as one block.
# HERALD_TEST_HA=0 leaves the clusters and the ha tier out (a machine without the memory).
#
# Exit code: the first failing tier's (the remaining sequential tiers are skipped, as `&&` would).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

ha=${HERALD_TEST_HA:-1}
work=$(mktemp -d)
ha_pid=''
trap 'rm -rf "$work"' EXIT

eval "$(bash scripts/services env)"
export HERALD_TEST_FROM_DIST=1

vitest() { node_modules/.bin/vitest "$@"; }

# The clusters, then the ha project, in the background: the exit code lands in $work/ha.rc.
start_ha_tier() {
  echo "ha tier: starting the clusters and the ha project in the background (output printed at the end)"
  (
    if ! bash scripts/services up rabbitmq-cluster kafka-cluster postgres-ha </dev/null >"$work/clusters.log" 2>&1; then
      echo "ha tier: the clusters did not start" >"$work/ha.log"
      echo 1 >"$work/ha.rc"
      exit
    fi
    eval "$(bash scripts/services env)"
    vitest run --project ha </dev/null >"$work/ha.log" 2>&1
    echo $? >"$work/ha.rc"
  ) &
  ha_pid=$!
}

finish_ha_tier() {
  [[ -n $ha_pid ]] || return 0
  wait "$ha_pid"
  printf '\n::: ha tier (ran beside the serial and browser tiers)\n'
  cat "$work/clusters.log" "$work/ha.log"
  return "$(cat "$work/ha.rc" 2>/dev/null || echo 1)"
}

vitest run --project unit --project integration --project integration-isolated || exit $?
if [[ $ha == 1 ]]; then start_ha_tier; fi
rc=0
vitest run --project serial &&
  vitest run --project browser --maxWorkers 2 &&
  vitest run --project browser-sms || rc=$?
finish_ha_tier
ha_rc=$?
((rc)) || rc=$ha_rc
exit "$rc"
