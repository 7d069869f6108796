#!/usr/bin/env bash
# The real-host scale run (on demand, not in CI): bench/scale_real_host.py through a real
# LangBot 4.11.2 with its database in SQLite or PostgreSQL, Chroma as vector DB.
#
#   nice -n 10 bench/scale_real_host.sh --db sqlite|postgresql --chunks 10000 [--queries 60] [--out FILE]
#
# Builds (or reuses) the LangBot and plugin venvs (scripts/host_env.sh), starts a private PostgreSQL
# for --db postgresql (host_pg_start, default server settings), then runs the Python driver inside a
# private network namespace (unshare -rn: only loopback), which starts the embedder, lbp rt, LangBot
# and `lbp run` itself and stops them at the end. The run dir (LangBot's data, logs) is removed after
# a successful run unless LUCIDRAG_SCALE_KEEP=1.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DB=sqlite
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --db) DB=$2; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
case "$DB" in sqlite|postgresql) ;; *) echo "--db sqlite|postgresql" >&2; exit 2 ;; esac
# shellcheck source=host_env.sh
. "$REPO/scripts/host_env.sh"
host_env_prepare "$REPO"
RUN="$(mktemp -d "${TMPDIR:-/tmp}/lucidrag-scale.XXXXXX")"
mkdir -p "$RUN/plugin" "$RUN/langbot"
tar -C "$REPO" --exclude=./.git --exclude='./.venv*' --exclude=./venv --exclude=__pycache__ --exclude=./.env \
    --exclude=./data --exclude=./.dev --exclude=./tests --exclude=./.pytest_cache --exclude=./bench \
    --exclude=./.e2e-artifacts -cf - . | tar -C "$RUN/plugin" -xf -
PG_DIR=""
cleanup() {
  local rc=$?
  [ -n "$PG_DIR" ] && host_pg_stop "$PG_DIR" && rm -rf "$PG_DIR"
  if [ "$rc" -eq 0 ] && [ "${LUCIDRAG_SCALE_KEEP:-0}" != 1 ]; then rm -rf "$RUN"; else echo "kept $RUN"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PG_ARGS=()
if [ "$DB" = postgresql ]; then
  PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/lucidrag-pg.XXXXXX")"
  host_pg_start "$PG_DIR"
  PG_ARGS=(--pg-socket-dir "$PG_DIR" --pg-port "$PG_PORT" --pg-db "$PG_DB" --pg-user "$PG_USER" --psql "$PG_BIN/psql")
fi
unshare -rn bash -c 'ip link set lo up && exec "$@"' _ "$LB_VENV/bin/python" "$REPO/bench/scale_real_host.py" \
  --run-dir "$RUN" --lb-venv "$LB_VENV" --pl-venv "$PL_VENV" ${PG_ARGS[@]+"${PG_ARGS[@]}"} ${ARGS[@]+"${ARGS[@]}"}
