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
# of its own). Built and started here when nothing listens on its port yet;
# its binary, data, log and pid file live in .services/ (git-ignored).
root="$(cd "$(dirname "$0")/.." && pwd)"
svc="$root/.services"
mongo_host=127.0.0.1
mongo_port=27017
ferret_bin="$svc/bin/ferretdb-test"
ferret_pid="$svc/ferretdb.pid"
ferret_log="$svc/ferretdb.log"

ferret_up() { echo "services: MongoDB wire server (FerretDB) is up on $mongo_host:$mongo_port"; }
mongo_listening() { timeout 2 bash -c "exec 3<>/dev/tcp/$mongo_host/$mongo_port" 2>/dev/null; }

# The pid in the pid file, if that process is alive and is our binary.
our_ferret_pid() {
  local pid
  [ -f "$ferret_pid" ] || return 1
  pid="$(cat "$ferret_pid" 2>/dev/null)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  ps -p "$pid" -o args= 2>/dev/null | grep -q "ferretdb-test" || return 1
  echo "$pid"
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
    rm -f "$ferret_pid"
  else
    rm -f "$ferret_pid"
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

# FerretDB: start it unless something listens on its port already.
if mongo_listening; then
  if pid="$(our_ferret_pid)"; then
    echo "services: FerretDB already running (pid $pid)"
  else
    echo "services: something already listens on $mongo_host:$mongo_port; not starting FerretDB"
  fi
  ferret_up
  exit 0
fi

if pid="$(our_ferret_pid)"; then
  # Started by an earlier run and not listening yet: wait for it below.
  echo "services: FerretDB (pid $pid) is starting"
else
  mkdir -p "$svc/bin" "$svc/ferretdb"
  echo "services: building FerretDB (the first build takes a few minutes)"
  if ! (cd "$root/internal/testservers/ferretdb" && "${GO:-go}" build -o "$ferret_bin" .); then
    echo "services: FAILED to build the FerretDB test server (internal/testservers/ferretdb)"
    exit 1
  fi
  echo "services: starting FerretDB on $mongo_host:$mongo_port (log: .services/ferretdb.log)"
  echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') services.sh starts FerretDB" >>"$ferret_log"
  nohup setsid "$ferret_bin" --listen "$mongo_host:$mongo_port" --dir "$svc/ferretdb" \
    </dev/null >>"$ferret_log" 2>&1 &
  pid=$!
  echo "$pid" >"$ferret_pid"
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
rm -f "$ferret_pid"
echo "services: last lines of .services/ferretdb.log:"
tail -n 20 "$ferret_log" 2>/dev/null | sed 's/^/  /' || true
echo "services: MongoDB wire server (FerretDB) is NOT reachable on $mongo_host:$mongo_port"
exit 1
