#!/usr/bin/env bash
# Every benchmark behind issue 22's goals table (docs/benchmarks.md, "Goals"), one after another, under
# one PostgreSQL durability profile: `npm run bench:goals` (durable, production's settings) and
# `HERALD_SERVICES_PG_DURABLE=0 npm run bench:goals` (the fast test profile). Each benchmark's full
# output goes to .cache/bench-goals/<profile>/<name>.log; its summary lines are printed as it ends.
# BENCH_GOALS_ALL=1 runs the other benchmarks after them; BENCH_GOALS_QUICK=1 runs smaller sizes (a check that everything runs, not figures to quote).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export HERALD_SERVICES_PG_DURABLE=${HERALD_SERVICES_PG_DURABLE:-1}
profile=$([[ $HERALD_SERVICES_PG_DURABLE == 1 ]] && echo durable || echo fast)
out=.cache/bench-goals/$profile
mkdir -p "$out"
quick=${BENCH_GOALS_QUICK:-0}
size() { [[ $quick == 1 ]] && echo "$2" || echo "$1"; }

run() {
  local name=$1 pattern=$2
  shift 2
  printf '\n::: %s (%s profile): npm run %s\n' "$name" "$profile" "$*"
  local t0=$SECONDS
  npm run --silent "$@" >"$out/$name.log" 2>&1
  local rc=$?
  grep -E "$pattern" "$out/$name.log" | tail -n 12
  printf '%s: exit %d after %d s (log: %s)\n' "$name" "$rc" $((SECONDS - t0)) "$out/$name.log"
}

run peers-queue 'profile|^pair|database:' bench:peers -- --jobs "$(size 20000 2000)" --pairs 1
run peers-in-process 'profile|^pair|database:' bench:peers -- --jobs "$(size 20000 2000)" --pairs 1 --dispatch in-process --scanners 0
run actions 'profile|^(baseline|burst|signal) p50|database:' bench:actions -- --burst "$(size 100000 5000)" --signals "$(size 1000 100)"
run relay-amqp 'profile|msg/s=|^ratio=' bench:relay -- --n "$(size 100000 10000)"
run relay-kafka 'profile|msg/s=|ratio=' bench:relay -- --sink kafka --n "$(size 100000 10000)" --ordered-n "$(size 100000 10000)"
run dispatch 'profile|^(baseline|burst)' bench:dispatch -- --scenario burst --burst "$(size 20000 2000)"
run cron 'profile|^(baseline|minute)' bench:cron -- --scenario minute --minute-jobs "$(size 10000 1000)"
run api 'profile|^(baseline|create|get)' bench:api
run sms-build 'profile|peak|rows/s' bench:sms -- --build-only --rows "$(size 1000000 50000)"

# BENCH_GOALS_ALL=1: the other benchmarks of docs/benchmarks.md too (longer: the LINE and SMPP runs take
# minutes each at full size).
[[ ${BENCH_GOALS_ALL:-0} == 1 ]] || exit 0
run consume 'profile|^consume ' bench:consume
run verify 'profile|events/s|peak|ratio' bench:verify
run sms-dispatch 'profile|rows/s=|peak_rss|msg/s=|ratio=' bench:sms -- --rows "$(size 1000000 50000)"
run line 'profile|ratio=|recipients/s' bench:line
run smpp 'profile|submits/s|ratio=' bench:smpp
run ui 'profile|p99|ratio' bench:ui
run startup 'profile|ready' bench:startup
