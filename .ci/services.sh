#!/usr/bin/env bash
# Services the test suite needs on a CI machine (root, Debian): a loopback-only PostgreSQL for the tests marked
# `postgres`, and Debian's Chromium for the tests marked `browser`. Prints the PostgreSQL URL as its last line.
set -euo pipefail

need=()
command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^$ver main$" || pg_createcluster "$ver" main >&2
# Debian's default listen_addresses is 'localhost': the server is reachable on loopback only.
pg_ctlcluster "$ver" main start >&2 2>/dev/null || pg_ctlcluster "$ver" main status >&2
port=$(pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main"{print $3}')
if ! su postgres -c "psql -p $port -tAc \"SELECT 1 FROM pg_roles WHERE rolname='contextdelta'\"" | grep -q 1; then
  su postgres -c "psql -p $port -c \"CREATE ROLE contextdelta LOGIN CREATEDB PASSWORD 'contextdelta'\"" >&2
fi
echo "postgresql+psycopg://contextdelta:contextdelta@127.0.0.1:$port/postgres"
