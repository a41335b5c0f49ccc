#!/usr/bin/env bash
# Starts the servers Chronicle's integration tests use, when they are not
# running yet. PostgreSQL runs on the machine already (127.0.0.1:5432);
# this script only checks it, and starts the local cluster if it stopped.
set -euo pipefail

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
