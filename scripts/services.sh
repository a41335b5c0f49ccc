#!/usr/bin/env bash
# Starts the servers Chronicle's integration tests use, when they are not
# running yet. PostgreSQL runs on the machine already (127.0.0.1:5432);
# this script only checks it, and starts the local cluster if it stopped.
# The MongoDB wire server (FerretDB) is built and started here: see below.
# `./scripts/services.sh stop` (make services-stop) stops the FerretDB that
# this script started, and nothing else.
set -euo pipefail

# MongoDB wire-compatible server for the MongoDB provider tests: FerretDB
# embedded with its SQLite backend (internal/testservers/ferretdb, a module
# of its own). Built and started here unless this checkout's runs already;
# its binary, data, log, pid file and URL file live in .services/
# (git-ignored).
#
# Its port is CHRONICLE_FERRETDB_PORT, default 27017. A port held by a
# server this checkout did not start (another checkout's FerretDB, a
# MongoDB) is never shared silently: with the default port, the next free
# port from 27018 is taken instead; with CHRONICLE_FERRETDB_PORT set, the
# script refuses. The URL of the server it started is written to
# .services/ferretdb.url, where the tests (provider/mongo/mongotest) read
# it; CHRONICLE_TEST_FERRETDB_URL, when set, names the test server instead
# and this script starts none.
root="$(cd "$(dirname "$0")/.." && pwd)"
svc="$root/.services"
mongo_host=127.0.0.1
mongo_port="${CHRONICLE_FERRETDB_PORT:-27017}"
ferret_bin="$svc/bin/ferretdb-test"
ferret_pid="$svc/ferretdb.pid"
ferret_log="$svc/ferretdb.log"
ferret_url="$svc/ferretdb.url"

if ! [[ "$mongo_port" =~ ^[0-9]+$ ]] || ((mongo_port < 1 || mongo_port > 65535)); then
  echo "services: CHRONICLE_FERRETDB_PORT=$mongo_port is not a TCP port"
  exit 1
fi

ferret_up() {
  echo "services: MongoDB wire server (FerretDB) is up on $mongo_host:$mongo_port"
  echo "services: the tests read mongodb://$mongo_host:$mongo_port/ from .services/ferretdb.url"
}
listening() { timeout 2 bash -c "exec 3<>/dev/tcp/$mongo_host/$1" 2>/dev/null; }
mongo_listening() { listening "$mongo_port"; }

# The pid in the pid file, if that process is alive and is our binary.
our_ferret_pid() {
  local pid
  [ -f "$ferret_pid" ] || return 1
  pid="$(cat "$ferret_pid" 2>/dev/null)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  ps -p "$pid" -o args= 2>/dev/null | grep -q "ferretdb-test" || return 1
  echo "$pid"
}

# The port our running FerretDB was started on (from its URL file).
our_ferret_port() {
  local url
  our_ferret_pid >/dev/null || return 1
  if [ ! -f "$ferret_url" ]; then
    # Started before the URL file existed, always on the default port.
    echo "mongodb://$mongo_host:27017/" >"$ferret_url"
  fi
  url="$(cat "$ferret_url" 2>/dev/null)" || return 1
  url="${url#mongodb://$mongo_host:}"
  url="${url%/}"
  [[ "$url" =~ ^[0-9]+$ ]] || return 1
  echo "$url"
}

if [ "${1:-}" = "stop" ]; then
  if pid="$(our_ferret_pid)"; then
    echo "services: stopping FerretDB (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "services: FerretDB (pid $pid) did not stop within 10 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$ferret_pid" "$ferret_url"
  else
    rm -f "$ferret_pid" "$ferret_url"
    echo "services: no FerretDB started by services.sh is running"
  fi
  exit 0
fi

pg_ready() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }

if command -v pg_isready >/dev/null 2>&1; then
  if ! pg_ready && command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
  fi
  if pg_ready; then echo "services: PostgreSQL is up on 127.0.0.1:5432"; else echo "services: PostgreSQL is NOT reachable on 127.0.0.1:5432"; fi
else
  echo "services: pg_isready not found; PostgreSQL tests use CHRONICLE_TEST_PG_URL"
fi

# Headless Chromium for the console's browser tests (console/browsertest).
if command -v chromium >/dev/null 2>&1; then
  echo "services: Chromium is installed ($(command -v chromium))"
else
  echo "services: installing Debian's chromium for the console's browser tests"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null; then
    echo "services: Chromium is installed ($(command -v chromium))"
  else
    echo "services: could NOT install chromium: the browser tests skip, and fail under CI=true"
  fi
fi

# Citus: a local cluster (coordinator and two workers, ports 9700-9702)
# for the Citus suite, started when the extension is installed on this
# machine. Citus is not in Debian's packages (docs/scaling.md says how to
# build it); without it the Citus tests skip. A failure here stops no
# other service.
if "$root/scripts/citus.sh" installed; then
  if "$root/scripts/citus.sh" start; then
    echo "services: Citus is up: the Citus tests use CHRONICLE_TEST_CITUS_URL=$("$root/scripts/citus.sh" url)"
  else
    echo "services: !!! the local Citus cluster did NOT start (see /var/tmp/chronicle-citus/*.log): the Citus tests skip"
  fi
else
  echo "services: !!! Citus is not installed on this machine: the Citus tests (TestCitus*) skip; docs/scaling.md says how to build it"
fi

# FerretDB: reuse this checkout's, or start one on a port nobody else holds.
if [ -n "${CHRONICLE_TEST_FERRETDB_URL:-}" ]; then
  echo "services: the MongoDB tests use CHRONICLE_TEST_FERRETDB_URL=$CHRONICLE_TEST_FERRETDB_URL; not starting FerretDB"
  exit 0
fi
if port="$(our_ferret_port)"; then
  if [ -n "${CHRONICLE_FERRETDB_PORT:-}" ] && [ "$port" != "$mongo_port" ]; then
    echo "services: this checkout's FerretDB runs on port $port, not CHRONICLE_FERRETDB_PORT=$mongo_port: run make services-stop first"
    exit 1
  fi
  mongo_port="$port"
  pid="$(our_ferret_pid)"
  if mongo_listening; then
    echo "services: FerretDB already running (pid $pid)"
    ferret_up
    exit 0
  fi
  # Started by an earlier run and not listening yet: wait for it below.
  echo "services: FerretDB (pid $pid) is starting"
else
  if mongo_listening; then
    if [ -n "${CHRONICLE_FERRETDB_PORT:-}" ]; then
      echo "services: $mongo_host:$mongo_port (CHRONICLE_FERRETDB_PORT) is held by a server this checkout did not start; refusing to share it"
      echo "services: choose another CHRONICLE_FERRETDB_PORT, or set CHRONICLE_TEST_FERRETDB_URL to use that server on purpose"
      exit 1
    fi
    held="$mongo_port"
    mongo_port=$((mongo_port + 1))
    while listening "$mongo_port"; do
      mongo_port=$((mongo_port + 1))
      if ((mongo_port > held + 100)); then
        echo "services: no free port in $((held + 1))-$((held + 100)); set CHRONICLE_FERRETDB_PORT"
        exit 1
      fi
    done
    echo "services: $mongo_host:$held is held by a server this checkout did not start; using port $mongo_port instead"
  fi
  mkdir -p "$svc/bin" "$svc/ferretdb"
  echo "services: building FerretDB (the first build takes a few minutes)"
  if ! (cd "$root/internal/testservers/ferretdb" && "${GO:-go}" build -o "$ferret_bin" .); then
    echo "services: FAILED to build the FerretDB test server (internal/testservers/ferretdb)"
    exit 1
  fi
  echo "services: starting FerretDB on $mongo_host:$mongo_port (log: .services/ferretdb.log)"
  echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') services.sh starts FerretDB on port $mongo_port" >>"$ferret_log"
  nohup setsid "$ferret_bin" --listen "$mongo_host:$mongo_port" --dir "$svc/ferretdb" \
    </dev/null >>"$ferret_log" 2>&1 &
  pid=$!
  echo "$pid" >"$ferret_pid"
  echo "mongodb://$mongo_host:$mongo_port/" >"$ferret_url"
fi

# Wait up to 30 s for the port to accept connections.
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  if mongo_listening; then ferret_up; exit 0; fi
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.2
done

if kill -0 "$pid" 2>/dev/null; then
  echo "services: FerretDB (pid $pid) did not accept connections on $mongo_host:$mongo_port within 30 s; stopping it"
  kill -TERM "$pid" 2>/dev/null || true
else
  echo "services: FerretDB exited before accepting connections on $mongo_host:$mongo_port"
fi
rm -f "$ferret_pid" "$ferret_url"
echo "services: last lines of .services/ferretdb.log:"
tail -n 20 "$ferret_log" 2>/dev/null | sed 's/^/  /' || true
echo "services: MongoDB wire server (FerretDB) is NOT reachable on $mongo_host:$mongo_port"
exit 1
