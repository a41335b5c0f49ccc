#!/usr/bin/env bash
# A local Citus cluster for Chronicle's Citus tests and benchmarks: a
# coordinator and two workers, three PostgreSQL 15 clusters of their own on
# 127.0.0.1 ports 9700 (coordinator), 9701 and 9702 (workers), data under
# /var/tmp/chronicle-citus, trust authentication, run as the postgres
# user. It leaves the machine's main PostgreSQL server (5432) alone.
#
#   scripts/citus.sh installed   exit 0 when the citus extension is installed
#   scripts/citus.sh start       create (first time) and start the cluster
#   scripts/citus.sh stop        stop its three servers
#   scripts/citus.sh status      say whether each server runs
#   scripts/citus.sh url         print the coordinator's URL
#
# Citus is not in Debian's packages: docs/scaling.md says how to build and
# install it. `start` is idempotent: servers already running are left
# alone, and a data directory that an earlier start left half made is made
# again. Every node has the database `chronicle` with the extension; the
# coordinator knows the workers (citus_set_coordinator_host,
# citus_add_node). The tests make a schema of their own in it.
set -euo pipefail

bin="${CHRONICLE_CITUS_PGBIN:-/usr/lib/postgresql/15/bin}"
base="${CHRONICLE_CITUS_DIR:-/var/tmp/chronicle-citus}"
host=127.0.0.1
db=chronicle
ports=(9700 9701 9702)
names=(coordinator worker1 worker2)

# as runs a command as the postgres user (the servers refuse to run as
# root), or as the current user when that is not root.
as() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

installed() {
  local dir
  for dir in "$("$bin/pg_config" --pkglibdir 2>/dev/null || true)" "$(pg_config --pkglibdir 2>/dev/null || true)" /usr/lib/postgresql/15/lib; do
    [ -n "$dir" ] && [ -f "$dir/citus.so" ] && return 0
  done
  return 1
}

running() { as "$bin/pg_ctl" -D "$base/$1" status >/dev/null 2>&1; }
ready() { "$bin/pg_isready" -h "$host" -p "$1" -q 2>/dev/null; }
psql_on() { local port=$1; shift; PGOPTIONS="-c client_min_messages=warning" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U postgres "$@"; }

# make_node creates the data directory of node $1 on port $2, unless a
# complete one (marked by citus.done) is there; a half-made one is removed.
make_node() {
  local name=$1 port=$2 dir="$base/$1"
  if [ -f "$dir/citus.done" ]; then return 0; fi
  if running "$name"; then as "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null || true; fi
  rm -rf "$dir"
  mkdir -p "$base"
  chown postgres: "$base" 2>/dev/null || true
  echo "citus: initdb $name (port $port)"
  as "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$base/$name.initdb.log" 2>&1
  cat >>"$dir/postgresql.conf" <<EOF
# chronicle scripts/citus.sh
port = $port
listen_addresses = '$host'
unix_socket_directories = '$base'
shared_preload_libraries = 'citus'
max_connections = 300
max_prepared_transactions = 200
shared_buffers = 128MB
EOF
  echo "host all all $host/32 trust" >>"$dir/pg_hba.conf"
}

start_node() {
  local name=$1 port=$2 dir="$base/$1"
  if running "$name"; then return 0; fi
  echo "citus: starting $name on $host:$port"
  as "$bin/pg_ctl" -D "$dir" -l "$base/$name.log" -w -t 60 start >/dev/null
}

# setup makes the database and extension on node port $1 (idempotent).
setup_db() {
  local port=$1
  if [ "$(psql_on "$port" -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != "1" ]; then
    psql_on "$port" -d postgres -c "CREATE DATABASE $db"
  fi
  psql_on "$port" -d "$db" -c "CREATE EXTENSION IF NOT EXISTS citus"
}

start() {
  if ! installed; then
    echo "citus: the citus extension is not installed (see docs/scaling.md to build it)"
    exit 1
  fi
  local i
  for i in 0 1 2; do make_node "${names[$i]}" "${ports[$i]}"; done
  for i in 0 1 2; do start_node "${names[$i]}" "${ports[$i]}"; done
  for i in 0 1 2; do
    setup_db "${ports[$i]}"
    touch "$base/${names[$i]}/citus.done"
  done
  psql_on "${ports[0]}" -d "$db" -c "SELECT citus_set_coordinator_host('$host', ${ports[0]})" >/dev/null
  for i in 1 2; do
    if [ "$(psql_on "${ports[0]}" -d "$db" -Atc "SELECT count(*) FROM pg_dist_node WHERE nodename = '$host' AND nodeport = ${ports[$i]}")" = "0" ]; then
      psql_on "${ports[0]}" -d "$db" -c "SELECT citus_add_node('$host', ${ports[$i]})" >/dev/null
    fi
  done
  echo "citus: coordinator $(url) with workers on ports ${ports[1]} and ${ports[2]}"
}

stop() {
  local i
  for i in 2 1 0; do
    if [ -d "$base/${names[$i]}" ] && running "${names[$i]}"; then
      echo "citus: stopping ${names[$i]}"
      as "$bin/pg_ctl" -D "$base/${names[$i]}" -m fast -w stop >/dev/null
    fi
  done
}

status() {
  local i up=0
  for i in 0 1 2; do
    if [ -d "$base/${names[$i]}" ] && running "${names[$i]}" && ready "${ports[$i]}"; then
      echo "citus: ${names[$i]} runs on $host:${ports[$i]}"
    else
      echo "citus: ${names[$i]} is NOT running ($host:${ports[$i]})"
      up=1
    fi
  done
  return $up
}

url() { echo "postgres://postgres@$host:${ports[0]}/$db"; }

case "${1:-}" in
installed) installed ;;
start) start ;;
stop) stop ;;
status) status ;;
url) url ;;
*)
  echo "usage: $0 start|stop|status|url|installed" >&2
  exit 2
  ;;
esac
