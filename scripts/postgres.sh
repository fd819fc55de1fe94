#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests of workers sharing one study over an Optuna RDB URL.
#   bash scripts/postgres.sh start DIR   installs Debian's postgresql if missing, creates a cluster in DIR,
#                                        listens on 127.0.0.1 only, prints the SQLAlchemy URL
#   bash scripts/postgres.sh stop DIR    stops that cluster (DIR can then be deleted)
set -euo pipefail
action=${1:?usage: postgres.sh start|stop DIR}
dir=${2:?usage: postgres.sh start|stop DIR}

bindir() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$found" ] && [ "$(id -u)" = 0 ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >&2
    found=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  [ -n "$found" ] || { echo "postgres.sh: no PostgreSQL server; install Debian's postgresql package" >&2; exit 1; }
  echo "$found"
}

# PostgreSQL refuses to run as root: as root, the cluster belongs to the package's `postgres` user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$action" in
  start)
    bin=$(bindir)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U cutune --no-sync >/dev/null
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U cutune cutune
    echo "postgresql+psycopg2://cutune@127.0.0.1:$port/cutune"
    ;;
  stop)
    bin=$(bindir)
    if [ -f "$dir/data/postmaster.pid" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null; fi
    ;;
  *)
    echo "usage: postgres.sh start|stop DIR" >&2
    exit 2
    ;;
esac
