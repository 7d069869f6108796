#!/usr/bin/env python3
"""Drive a real LangBot host through the user journey with LucidRAG, end to end.

Run by tests/e2e/run.sh inside a private network namespace, with the LangBot venv's python
(stdlib + that venv's chromadb). LangBot, the plugin runtime and the offline embedder are
already up; this script logs in, attaches the plugin with `lbp run`, and does what a user does
in the web UI, through the same HTTP endpoints:

  log in -> engine listed with its schemas -> register an embedding model -> KB without the
  required model is refused -> KB A created -> one file per format + a bad file uploaded, each
  reaches its terminal status (bad: failed, with our message) -> questions find their files in
  the top 5 -> retrieval settings edited (PUT) take effect -> a deleted file never comes back
  -> KB B sees nothing of KB A and vice versa -> both KBs deleted, no vectors left in the host's
  vector DB (--backend chroma|milvus|seekdb: Chroma is read live, Milvus Lite / SeekDB after
  LangBot stopped) -> the same queries score the same as on the other backends (--scores-file).
  With --llm-url, a pipeline bound to KB A answers through the fixture runner (tests/e2e/pipeline.py,
  around the delete step); with --browser-python, tests/e2e/browser.py repeats the journey in the
  web UI before the KBs are deleted.

One [PASS]/[FAIL] line per check; the last line is exactly `N passed, M failed`.
Exit 0 only if nothing failed.

The scenario JSON (written by tests/e2e/e2e_samples.py) has:
  files:     [{path, name, bad?, facts: [..]}]      facts = substrings that only this file has
  queries:   [{query, expect_file, expect_text}]
  delete_file, settings_query, keyword_query, isolation: {files, queries}, never_text: [..],
  creation_settings (merged over the schema defaults), expect_creation_fields, expect_retrieval_fields
"""
from __future__ import annotations

import argparse
import json
import mimetypes
import os
import re
import signal
import subprocess
import sys
import time
import unicodedata
import urllib.error
import urllib.request
import uuid

import pipeline  # tests/e2e/pipeline.py: the KB-bound-to-a-pipeline stage
import postgres  # tests/e2e/postgres.py: LangBot's database in PostgreSQL, read with psql

TERMINAL = ("completed", "failed", "interrupted")
GENERIC_FAIL = "Plugin ingestion returned failed status"
NEVER_TEXT: list[str] = []  # scenario "never_text": strings no result may contain (e.g. HTML <script> code)

# ----------------------------------------------------------------------------- report


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.fail_names: list[str] = []
        self.notes: list[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.fail_names.append(name)
        print(f"[{'PASS' if ok else 'FAIL'}] {name}" + (f" -- {detail}" if detail else ""), flush=True)
        return ok

    def info(self, msg: str) -> None:
        print(f"       {msg}", flush=True)

    def note(self, msg: str) -> None:
        """A host behaviour worth knowing; printed now and again in the summary."""
        self.notes.append(msg)
        print(f"[NOTE] {msg}", flush=True)


R = Report()


class Abort(Exception):
    """A check failed that the rest of the journey depends on."""


def must(name: str, ok: bool, detail: str = "") -> None:
    if not R.check(name, ok, detail):
        raise Abort(name)


# ----------------------------------------------------------------------------- http


class Api:
    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.token: str | None = None

    def _headers(self, extra: dict | None = None) -> dict:
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(extra or {})
        return h

    def _do(self, req: urllib.request.Request, timeout: float) -> tuple[int, object]:
        try:
            with urllib.request.urlopen(req, timeout=timeout) as f:
                status, raw = f.status, f.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
            return 0, {"transport_error": str(e)}
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, {"raw": raw.decode("utf-8", "replace")[:2000]}

    def call(self, method: str, path: str, body=None, timeout: float = 120) -> tuple[int, object]:
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=self._headers({"Content-Type": "application/json"} if data else None))
        return self._do(req, timeout)

    def upload(self, path: str, filename: str, timeout: float = 120) -> tuple[int, object]:
        boundary = "----lucidrag" + uuid.uuid4().hex
        with open(path, "rb") as f:
            content = f.read()
        ctype = mimetypes.guess_type(filename)[0] or "application/octet-stream"
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode("utf-8")
        body = head + content + f"\r\n--{boundary}--\r\n".encode("utf-8")
        req = urllib.request.Request(self.base + "/api/v1/files/documents", data=body, method="POST",
                                     headers=self._headers({"Content-Type": f"multipart/form-data; boundary={boundary}"}))
        return self._do(req, timeout)


def ok_body(status: int, body) -> bool:
    return status == 200 and isinstance(body, dict) and body.get("code") == 0


def short(obj, n: int = 300) -> str:
    s = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, default=str)
    return s if len(s) <= n else s[:n] + "..."


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text or "")).strip().lower()


def result_text(r: dict) -> str:
    parts = []
    for c in r.get("content") or []:
        if isinstance(c, dict) and c.get("type") == "text" and c.get("text"):
            parts.append(c["text"])
    return "\n".join(parts)


# ----------------------------------------------------------------------------- plugin process


def read_plugin_id(plugin_dir: str) -> str:
    author = name = None
    with open(os.path.join(plugin_dir, "manifest.yaml"), encoding="utf-8") as f:
        in_meta = False
        for line in f:
            if re.match(r"^metadata:\s*$", line):
                in_meta = True
                continue
            if in_meta and re.match(r"^\S", line):
                break
            m = re.match(r"^  (author|name):\s*['\"]?([^'\"#\n]+?)['\"]?\s*(#.*)?$", line)
            if in_meta and m:
                if m.group(1) == "author":
                    author = m.group(2).strip()
                else:
                    name = m.group(2).strip()
    if not author or not name:
        raise SystemExit(f"cannot read metadata.author/name from {plugin_dir}/manifest.yaml")
    return f"{author}/{name}"


class PluginProc:
    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def start(self, lbp: str, plugin_dir: str, debug_url: str, key: str, log_path: str, pid_file: str | None):
        env = dict(os.environ, DEBUG_RUNTIME_WS_URL=debug_url, PLUGIN_DEBUG_KEY=key, PYTHONUNBUFFERED="1")
        logf = open(log_path, "ab")
        self.proc = subprocess.Popen([lbp, "run"], cwd=plugin_dir, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        if pid_file:
            with open(pid_file, "w") as f:
                f.write(str(self.proc.pid))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if not self.alive():
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except Exception:  # noqa: BLE001
                pass


# ----------------------------------------------------------------------------- schema helpers


def schema_items(schema) -> list[dict]:
    if isinstance(schema, dict):
        schema = schema.get("schema", [])
    return [i for i in (schema or []) if isinstance(i, dict)]


def defaults(schema) -> dict:
    return {i["name"]: i["default"] for i in schema_items(schema)
            if i.get("name") and i.get("default") is not None}


def describe(schema) -> str:
    return ", ".join(f"{i.get('name')}:{i.get('type')}{'*' if i.get('required') else ''}" for i in schema_items(schema))


# ----------------------------------------------------------------------------- KB helpers


class KB:
    def __init__(self, label: str, uuid_: str):
        self.label = label
        self.uuid = uuid_
        self.files: dict[str, dict] = {}  # name -> {path, upload_id, task_id, rec, facts, ids, seen}


def create_kb(api: Api, label: str, plugin_id: str, cs: dict, rs: dict) -> KB:
    body = {"name": f"lucidrag-e2e-{label}", "description": f"LucidRAG E2E knowledge base {label}",
            "knowledge_engine_plugin_id": plugin_id, "creation_settings": cs, "retrieval_settings": rs}
    s, b = api.call("POST", "/api/v1/knowledge/bases", body)
    ok = ok_body(s, b) and bool((b.get("data") or {}).get("uuid"))
    must(f"create KB {label}", ok, f"uuid={b['data']['uuid']}" if ok else f"HTTP {s} {short(b)}")
    return KB(label, b["data"]["uuid"])


def list_files(api: Api, kb: str) -> list[dict] | None:
    s, b = api.call("GET", f"/api/v1/knowledge/bases/{kb}/files")
    if not ok_body(s, b):
        return None
    return b["data"].get("files", [])


def get_task(api: Api, task_id) -> dict | None:
    s, b = api.call("GET", f"/api/v1/system/tasks/{task_id}")
    return b["data"] if ok_body(s, b) else None


def upload_files(api: Api, kb: KB, files: list[dict], timeout_s: float) -> None:
    pending = {}
    for fe in files:
        path, name = fe["path"], fe.get("name") or os.path.basename(fe["path"])
        expect = "failed" if fe.get("bad") else "completed"
        size = os.path.getsize(path)
        s, b = api.upload(path, name)
        ok = ok_body(s, b) and bool((b.get("data") or {}).get("file_id"))
        if not R.check(f"[{kb.label}] upload {name} ({size} B)", ok, "" if ok else f"HTTP {s} {short(b)}"):
            continue
        upload_id = b["data"]["file_id"]
        t_add = time.time()
        while True:
            s, b = api.call("POST", f"/api/v1/knowledge/bases/{kb.uuid}/files", {"file_id": upload_id})
            # the host admits at most 8 running ingestions per workspace (HTTP 429); a client retries
            if s != 429 or time.time() - t_add > 120:
                break
            time.sleep(1)
        if time.time() - t_add > 1:
            R.note(f"adding {name} was refused with HTTP 429 task_capacity_exceeded for {time.time() - t_add:.0f}s "
                   "(8 ingestions already running in the workspace); retried")
        if not R.check(f"[{kb.label}] add {name} to the KB", ok_body(s, b), "" if ok_body(s, b) else f"HTTP {s} {short(b)}"):
            continue
        kb.files[name] = {"path": path, "upload_id": upload_id, "task_id": (b.get("data") or {}).get("task_id"),
                          "expect": expect, "rec": None, "facts": fe.get("facts") or [], "t0": time.time(),
                          "seen": [], "bad": bool(fe.get("bad"))}
        pending[name] = kb.files[name]
    pending = wait_terminal(api, kb.uuid, kb.files, set(pending), timeout_s)
    for name, fe in kb.files.items():
        rec = fe["rec"] or {}
        st = rec.get("status", "<no record>")
        fe["ids"] = {x for x in (rec.get("uuid"), rec.get("engine_document_id")) if x}
        if name in pending:
            R.check(f"[{kb.label}] ingest {name} -> {fe['expect']}", False,
                    f"still {' -> '.join(fe['seen']) or st} after {timeout_s:.0f}s")
            continue
        R.check(f"[{kb.label}] ingest {name} -> {fe['expect']}", st == fe["expect"],
                f"{' -> '.join(fe['seen'])} in {fe.get('secs', 0):.1f}s")


def attribute(r: dict, kbs: list[KB]) -> tuple[str, str] | None:
    """(kb label, file name) a result came from: host file ids in its metadata, else its text."""
    md = r.get("metadata") or {}
    vals = {v for v in md.values() if isinstance(v, str)}
    for kb in kbs:
        for name, fe in kb.files.items():
            if fe.get("ids") and fe["ids"] & vals:
                return kb.label, name
    txt = norm(result_text(r))
    for kb in kbs:
        for name, fe in kb.files.items():
            if any(norm(f) in txt for f in fe["facts"]):
                return kb.label, name
    return None


def retrieve(api: Api, kb: KB, query: str, rs: dict | None = None) -> tuple[bool, list[dict], str]:
    s, b = api.call("POST", f"/api/v1/knowledge/bases/{kb.uuid}/retrieve",
                    {"query": query, "retrieval_settings": rs or {}})
    if not ok_body(s, b):
        return False, [], f"HTTP {s} {short(b)}"
    return True, (b.get("data") or {}).get("results") or [], ""


def fmt_hits(results: list[dict], kbs: list[KB], n: int = 5) -> str:
    out = []
    for i, r in enumerate(results[:n]):
        who = attribute(r, kbs)
        d, s = r.get("distance"), r.get("score")
        ds = f"d={d:.3f}" if isinstance(d, (int, float)) else f"d={d}"
        ss = f"s={s:.3f}" if isinstance(s, (int, float)) else f"s={s}"
        out.append(f"#{i + 1} {who[0] + ':' + who[1] if who else '?'} {ds} {ss} \"{norm(result_text(r))[:50]}\"")
    return "; ".join(out) if out else "(no results)"


def hit_ok(results: list[dict], kb: KB, name: str, expect_text: str) -> bool:
    needle = norm(expect_text)
    return any(attribute(r, [kb]) == (kb.label, name) and needle in norm(result_text(r)) for r in results)


def run_queries(api: Api, kb: KB, queries: list[dict], kbs: list[KB], top: int = 5) -> None:
    for q in queries:
        exp = q["expect_file"]
        ok, res, err = retrieve(api, kb, q["query"])
        name = f"[{kb.label}] '{q['query'][:48]}' -> {exp} in top {top}"
        if not ok:
            R.check(name, False, err)
            continue
        R.check(name, hit_ok(res[:top], kb, exp, q["expect_text"]), fmt_hits(res, kbs))
        junk = [t for t in NEVER_TEXT for r in res if norm(t) in norm(result_text(r))]
        if junk:
            R.check(f"[{kb.label}] '{q['query'][:40]}': no markup/script text in results", False, f"found {junk}")


# ----------------------------------------------------------------------------- vector DBs


def vectors_left(chroma_path: str, kb_uuid: str) -> tuple[int | None, str]:
    """Vectors the host's embedded Chroma still holds for a KB (None: cannot tell)."""
    if not chroma_path or not os.path.isdir(chroma_path):
        return None, f"no Chroma dir at {chroma_path}"
    try:
        import chromadb  # present in the LangBot venv that runs this script

        client = chromadb.PersistentClient(path=chroma_path)
        n, cols = 0, []
        for c in client.list_collections():
            name = c if isinstance(c, str) else c.name
            col = client.get_collection(name)
            got = col.get(where={"_langbot_knowledge_base_uuid": kb_uuid}, include=[])
            k = len(got.get("ids") or [])
            if name == kb_uuid:
                k = max(k, col.count())
            if k:
                cols.append(f"{name}:{k}")
            n += k
        return n, ",".join(cols)
    except Exception as e:  # noqa: BLE001
        return None, f"cannot read Chroma: {e!r}"


def milvus_rows(uri: str, file_ids: set[str]) -> tuple[int | None, int | None, str]:
    """(rows whose file_id is one of file_ids, rows in all collections, detail) in a Milvus Lite
    .db. Milvus keeps no `_langbot_*` metadata, so a KB's rows are found by its files' ids.
    Opened after LangBot stopped (the .db belongs to one process at a time)."""
    if not uri or not os.path.exists(uri):
        return None, None, f"no Milvus Lite db at {uri}"
    try:
        from pymilvus import (
            MilvusClient,  # LangBot's dependency; milvus-lite serves the .db file
        )

        client = MilvusClient(uri=uri)
        mine = total = 0
        cols = []
        for name in client.list_collections():
            client.load_collection(collection_name=name)
            n = int(client.query(collection_name=name, output_fields=["count(*)"])[0]["count(*)"])
            total += n
            k = 0
            ids = sorted(file_ids)
            for i in range(0, len(ids), 50):
                expr = "file_id in [" + ", ".join(json.dumps(x) for x in ids[i:i + 50]) + "]"
                k += int(client.query(collection_name=name, filter=expr, output_fields=["count(*)"])[0]["count(*)"])
            mine += k
            cols.append(f"{name}:{n}")
        client.close()
        return mine, total, ",".join(cols) or "no collections"
    except Exception as e:  # noqa: BLE001
        return None, None, f"cannot read Milvus Lite: {e!r}"


def seekdb_rows(path: str, kb_uuid: str) -> tuple[int | None, str]:
    """Vectors an embedded SeekDB still holds for a KB (it keeps the host's metadata keys).
    Opened after LangBot stopped (embedded SeekDB belongs to one process at a time)."""
    if not path or not os.path.isdir(path):
        return None, f"no SeekDB dir at {path}"
    try:
        import pyseekdb

        client = pyseekdb.Client(path=path, database="langbot")
        n, cols = 0, []
        for c in client.list_collections():
            name = c if isinstance(c, str) else c.name
            col = client.get_collection(name, embedding_function=None)
            got = col.get(where={"_langbot_knowledge_base_uuid": kb_uuid}, include=["metadatas"])
            k = len(got.get("ids") or [])
            if k:
                cols.append(f"{name}:{k}")
            n += k
        return n, ",".join(cols)
    except Exception as e:  # noqa: BLE001
        return None, f"cannot read SeekDB: {e!r}"


def stop_langbot(pid_file: str, timeout: float = 30) -> bool:
    """Stop LangBot (its own process group, started with setsid) so its embedded DB is closed."""
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.25)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    time.sleep(1)
    return True


def check_vectors_left(args, kbs: list["KB"]) -> None:
    if args.backend == "chroma":
        for kb in kbs:
            left, where = vectors_left(args.chroma_path, kb.uuid)
            R.check(f"KB {kb.label}: no vectors left in Chroma", left == 0,
                    where if left is None else (f"{left} left ({where})" if left else ""))
        return
    R.check("LangBot stopped to read its embedded vector DB", stop_langbot(args.langbot_pid_file),
            args.langbot_pid_file)
    if args.backend == "milvus":
        for kb in kbs:
            ids = {x for fe in kb.files.values() for x in fe.get("ids") or ()}
            mine, total, where = milvus_rows(args.milvus_uri, ids)
            R.check(f"KB {kb.label}: no vectors of its {len(ids)} files left in Milvus Lite", mine == 0,
                    where if mine is None else (f"{mine} left ({where})" if mine else where))
        _, total, where = milvus_rows(args.milvus_uri, set())
        R.check("Milvus Lite: no vectors left in any collection", total == 0, where)
    elif args.backend == "seekdb":
        for kb in kbs:
            left, where = seekdb_rows(args.seekdb_path, kb.uuid)
            R.check(f"KB {kb.label}: no vectors left in SeekDB", left == 0,
                    where if left is None else (f"{left} left ({where})" if left else ""))


SCORE_TOLERANCE = 0.02


def check_scores(args, api: "Api", kb: "KB", sc: dict) -> None:
    """The same query gets the same scores on every backend (the vector score is the cosine)."""
    label = args.backend + ("+postgresql" if args.pg_socket_dir else "")  # LangBot's DB changes no score
    got: dict[str, list[float]] = {}
    queries = [q["query"] for q in sc["queries"][:4]]
    for mode in ("vector", "hybrid"):
        for q in queries:
            ok, res, err = retrieve(api, kb, q, {"search_mode": mode, "top_k": 3})
            got[f"{mode}|{q}"] = [round(float(r.get("score", -1)), 4) for r in res] if ok else []
    R.info(f"top scores on {label}: " + short({k[:40]: v for k, v in got.items()}, 600))
    if not args.scores_file:
        return
    try:
        with open(args.scores_file, encoding="utf-8") as f:
            table = json.load(f)
    except (OSError, ValueError):
        table = {}
    for other, theirs in sorted(table.items()):
        if other == label:
            continue
        diffs = [(k, a[0], b[0]) for k, a in got.items() for b in [theirs.get(k) or []] if a and b]
        worst = max((abs(a - b) for _, a, b in diffs), default=None)
        R.check(f"[{kb.label}] top scores on {label} = on {other} (within {SCORE_TOLERANCE}, "
                f"{len(diffs)} queries)", worst is not None and worst <= SCORE_TOLERANCE and len(diffs) == len(got),
                f"max |diff| = {worst}" + ("" if worst is None or worst <= SCORE_TOLERANCE else
                                          "; " + short([d for d in diffs if abs(d[1] - d[2]) > SCORE_TOLERANCE])))
    table[label] = got
    with open(args.scores_file, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1, sort_keys=True)


# ----------------------------------------------------------------------------- journey


def journey(args, sc: dict, api: Api, embed: Api, plugin: PluginProc) -> None:
    must("LangBot HTTP API up", wait_api(api, 180), args.base_url)

    # ---- log in (the first start asks for an admin account, as the web UI does)
    s, b = api.call("GET", "/api/v1/user/init")
    if ok_body(s, b) and not b["data"].get("initialized"):
        s, b = api.call("POST", "/api/v1/user/init", {"user": args.user, "password": args.password})
        must("create the admin account (POST /user/init)", ok_body(s, b), short(b))
    s, b = api.call("POST", "/api/v1/user/auth", {"user": args.user, "password": args.password})
    must("log in (POST /user/auth -> token)", ok_body(s, b) and bool((b.get("data") or {}).get("token")),
         "" if ok_body(s, b) else short(b))
    api.token = b["data"]["token"]

    # ---- attach the plugin in debug mode
    s, b = api.call("GET", "/api/v1/plugins/debug-info")
    must("plugin debug-info", ok_body(s, b) and bool((b.get("data") or {}).get("plugin_debug_key")),
         b["data"]["debug_url"] if ok_body(s, b) else short(b))
    plugin_id = read_plugin_id(args.plugin_dir)
    debug = {"url": args.debug_url or b["data"]["debug_url"], "key": b["data"]["plugin_debug_key"]}
    plugin.start(args.lbp, args.plugin_dir, debug["url"], debug["key"],
                 args.plugin_log or os.path.join(args.workdir, "plugin.log"), args.plugin_pid_file or None)

    engine, t0 = None, time.time()
    while time.time() - t0 < 120 and plugin.alive():
        s, b = api.call("GET", "/api/v1/knowledge/engines")
        if ok_body(s, b):
            engine = next((e for e in b["data"].get("engines", []) if e.get("plugin_id") == plugin_id), None)
            if engine:
                break
        time.sleep(1)
    must(f"engine {plugin_id} listed by GET /knowledge/engines", engine is not None,
         f"after {time.time() - t0:.1f}s, capabilities={engine.get('capabilities')}" if engine else
         ("lbp run exited, see plugin.log" if not plugin.alive() else "not listed after 120s"))
    cschema, rschema = engine.get("creation_schema"), engine.get("retrieval_schema")
    R.info(f"creation_schema: {describe(cschema)}")
    R.info(f"retrieval_schema: {describe(rschema)}")
    R.check("engine declares doc_ingestion", "doc_ingestion" in (engine.get("capabilities") or []),
            str(engine.get("capabilities")))
    citems = {i.get("name"): i for i in schema_items(cschema)}
    sel = [n for n, i in citems.items() if i.get("type") == "embedding-model-selector"]
    R.check("creation_schema: a required embedding-model-selector",
            any(citems[n].get("required") for n in sel), f"selectors={sel}")
    missing = [f for f in sc.get("expect_creation_fields", []) if f not in citems]
    R.check("creation_schema has " + ",".join(sc.get("expect_creation_fields", [])), not missing, f"missing={missing}")
    ch = citems.get("chunking") or {}
    if "chunking" in sc.get("expect_creation_fields", []):
        opts = sorted(o.get("name") for o in (ch.get("options") or []) if isinstance(o, dict))
        R.check("chunking is a select of fixed|parent_child|structure",
                ch.get("type") == "select" and opts == ["fixed", "parent_child", "structure"],
                f"type={ch.get('type')} options={opts}")
    ritems = {i.get("name"): i for i in schema_items(rschema)}
    missing = [f for f in sc.get("expect_retrieval_fields", []) if f not in ritems]
    R.check("retrieval_schema has " + ",".join(sc.get("expect_retrieval_fields", [])), not missing, f"missing={missing}")

    # ---- register the embedding model, as on the Models page
    body = {"name": "offline-embed", "provider": {"requester": "openai-chat-completions",
                                                  "base_url": args.embed_url.rstrip("/") + "/v1",
                                                  "api_keys": ["sk-offline"]},
            "extra_args": {}}
    s, b = api.call("POST", "/api/v1/provider/models/embedding", body)
    must("register the offline embedding model", ok_body(s, b), short(b))
    embed_uuid = b["data"]["uuid"]

    cs = dict(defaults(cschema))
    cs.update({n: embed_uuid for n in sel})
    cs.update(sc.get("creation_settings") or {})
    rs = defaults(rschema)
    R.info(f"creation_settings={short(cs, 400)}")
    R.info(f"retrieval_settings={short(rs, 400)}")

    # ---- the required model is enforced
    bad_cs = {k: v for k, v in cs.items() if k not in sel}
    s, b = api.call("POST", "/api/v1/knowledge/bases", {"name": "no-model", "knowledge_engine_plugin_id": plugin_id,
                                                        "creation_settings": bad_cs, "retrieval_settings": rs})
    refused = not ok_body(s, b)
    R.check("KB without an embedding model is refused", refused and s == 400, f"HTTP {s} {short(b, 160)}")
    if not refused and isinstance(b.get("data"), dict) and b["data"].get("uuid"):
        api.call("DELETE", f"/api/v1/knowledge/bases/{b['data']['uuid']}")

    kbs: list[KB] = []
    stage = pipeline.new_stage(api, R, Api(args.llm_url), PluginProc) if args.llm_url else None
    pg = postgres.new_stage(args, R)
    try:
        kb_a = create_kb(api, "A", plugin_id, cs, rs)
        kbs.append(kb_a)
        if pg:
            postgres.after_kb_created(pg, kb_a)
        s, b = api.call("GET", f"/api/v1/knowledge/bases/{kb_a.uuid}")
        stored = ((b.get("data") or {}).get("base") or {}) if ok_body(s, b) else {}
        R.check("[A] stored creation_settings are what we sent", stored.get("creation_settings") == cs,
                short(stored.get("creation_settings")))

        # ---- one file of each format, plus a bad one
        t_ing = time.time()
        upload_files(api, kb_a, sc["files"], float(sc.get("ingest_timeout_s", 300)))
        R.info(f"KB A ingestion took {time.time() - t_ing:.1f}s; embedder: {stats_line(embed)}")
        for name, fe in kb_a.files.items():
            if fe["bad"]:
                check_error_message(api, kb_a, name, fe)
        if pg:
            postgres.after_ingest(pg, kb_a)

        # ---- questions whose answers are in specific files
        run_queries(api, kb_a, sc["queries"], kbs)

        # ---- one score_threshold means the same on every backend
        check_scores(args, api, kb_a, sc)

        # ---- retrieval settings edited in the KB's settings dialog (PUT) take effect
        check_retrieval_settings(api, kb_a, sc, rs, kbs)

        # ---- a pipeline bound to KB A feeds the bot (tests/e2e/pipeline.py)
        if stage and pipeline.setup(stage, lbp=args.lbp, workdir=args.workdir, debug_url=debug["url"],
                                    debug_key=debug["key"], llm_base=args.llm_url.rstrip("/") + "/v1",
                                    kb_uuid=kb_a.uuid, log_path=os.path.join(os.path.dirname(
                                        args.plugin_log or args.workdir + "/x"), "runner.log"),
                                    pid_file=os.path.join(os.path.dirname(args.plugin_pid_file), "runner.pid")
                                    if args.plugin_pid_file else None):
            pipeline.before_delete(stage, sc.get("pipeline") or {})

        # ---- delete one file, its text never comes back
        del_name = sc["delete_file"]
        fe = kb_a.files.get(del_name)
        if fe and fe.get("rec"):
            s, b = api.call("DELETE", f"/api/v1/knowledge/bases/{kb_a.uuid}/files/{fe['rec']['uuid']}")
            R.check(f"[A] delete file {del_name} (HTTP 200)", ok_body(s, b), f"HTTP {s} {short(b)}")
            recs = list_files(api, kb_a.uuid) or []
            R.check(f"[A] {del_name} gone from the file list", all(r.get("uuid") != fe["rec"]["uuid"] for r in recs),
                    f"{len(recs)} files left")
            if pg:
                postgres.after_file_delete(pg, kb_a, fe["rec"]["uuid"], del_name)
            qs = [q for q in sc["queries"] if q["expect_file"] == del_name] + [{"query": f} for f in fe["facts"]]
            for q in qs:
                for mode in (None, "keyword"):
                    ok, res, err = retrieve(api, kb_a, q["query"], {"top_k": 20, **({"search_mode": mode} if mode else {})})
                    leaked = [r for r in res if attribute(r, [kb_a]) == ("A", del_name)
                              or any(norm(f) in norm(result_text(r)) for f in fe["facts"])]
                    R.check(f"[A] after delete, '{q['query'][:40]}'{' (keyword)' if mode else ''} never returns {del_name}",
                            ok and not leaked, err or fmt_hits(leaked or res, kbs, 3))
        else:
            R.check(f"[A] delete file {del_name}", False, "file was not ingested into KB A")
        if stage:
            pipeline.after_delete(stage, sc.get("pipeline") or {}, del_name)

        # ---- a second KB: the two never see each other's chunks
        iso = sc["isolation"]
        kb_b = create_kb(api, "B", plugin_id, cs, rs)
        kbs.append(kb_b)
        upload_files(api, kb_b, iso["files"], float(sc.get("ingest_timeout_s", 300)))
        run_queries(api, kb_b, iso["queries"], kbs)
        a_facts = [f for fe in kb_a.files.values() for f in fe["facts"]]
        b_facts = [f for fe in kb_b.files.values() for f in fe["facts"]]
        for q in sc["queries"]:
            ok, res, err = retrieve(api, kb_b, q["query"], {"top_k": 20})
            foreign = [r for r in res if (attribute(r, kbs) or ("",))[0] == "A"
                       or any(norm(f) in norm(result_text(r)) for f in a_facts)]
            R.check(f"[B] '{q['query'][:40]}' returns nothing of KB A", ok and not foreign, err or fmt_hits(foreign or res, kbs, 3))
        for q in iso["queries"]:
            ok, res, err = retrieve(api, kb_a, q["query"], {"top_k": 20})
            foreign = [r for r in res if (attribute(r, kbs) or ("",))[0] == "B"
                       or any(norm(f) in norm(result_text(r)) for f in b_facts)]
            R.check(f"[A] '{q['query'][:40]}' returns nothing of KB B", ok and not foreign, err or fmt_hits(foreign or res, kbs, 3))

        # ---- the agent's tools, on pipelines bound to KB A and to KB B (tests/e2e/pipeline.py)
        if stage:
            pipeline.agent_tools(stage, sc.get("agent_tools") or {}, kb_a, kb_b)

        # ---- no file was ever interrupted
        for kb in kbs:
            recs = list_files(api, kb.uuid) or []
            seen = {n: fe["seen"] for n, fe in kb.files.items()}
            bad = [f"{n}: {' -> '.join(v)}" for n, v in seen.items() if "interrupted" in v]
            bad += [f"{r.get('uuid')}: {r.get('status')}" for r in recs if r.get("status") == "interrupted"]
            R.check(f"[{kb.label}] no file ever 'interrupted'", not bad, "; ".join(bad))

        # ---- the same journey in the web UI, while LucidRAG and the fixture runner are attached
        if args.browser_python:
            run_browser(args, sc)
    finally:
        if stage:
            pipeline.teardown(stage)
        # ---- delete both KBs (also after a failure, so nothing is left behind)
        for kb in kbs:
            s, b = api.call("DELETE", f"/api/v1/knowledge/bases/{kb.uuid}")
            if not R.check(f"delete KB {kb.label} (HTTP 200)", ok_body(s, b), f"HTTP {s} {short(b)}"):
                continue
            s2, _ = api.call("GET", f"/api/v1/knowledge/bases/{kb.uuid}")
            R.check(f"KB {kb.label} gone (GET -> 404)", s2 == 404, f"HTTP {s2}")
        if pg and kbs:
            postgres.after_kb_deletes(pg, kbs)
    R.check("lbp run still alive at the end", plugin.alive())
    plugin.stop()
    check_vectors_left(args, kbs)


def run_browser(args, sc: dict) -> None:
    """tests/e2e/browser.py with the Python that has Playwright; its lines go to our output."""
    samples = os.path.dirname(os.path.abspath(args.scenario))
    cmd = [args.browser_python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser.py"),
           "--base-url", args.base_url, "--user", args.user, "--password", args.password,
           "--plugin-dir", args.plugin_dir, "--good-file", os.path.join(samples, sc["delete_file"]),
           "--bad-file", os.path.join(samples, next(f["name"] for f in sc["files"] if f.get("bad"))),
           "--shots", args.browser_shots]
    drop = sc.get("browser_drop")
    if drop:
        cmd += ["--drop-file", os.path.join(samples, drop["name"]), "--drop-query", drop["query"],
                "--drop-expect", drop["expect_text"]]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace")
    except OSError as e:
        print(f"SKIPPED browser: cannot run {args.browser_python}: {e}", flush=True)
        return
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
    proc.wait()


def check_error_message(api: Api, kb: KB, name: str, fe: dict) -> None:
    rec = fe.get("rec") or {}
    if rec.get("status") != "failed":
        return
    # what the file list shows: the web UI renders this list
    extra = {k: v for k, v in rec.items() if isinstance(v, str) and len(v) > 20 and k not in ("uuid", "file_name", "kb_id",
                                                                                                "engine_document_id")}
    if not any(k for k in rec if "error" in k or "message" in k or "reason" in k):
        R.note(f"the KB file list has no error field for a failed file (keys: {sorted(rec)}); the engine's "
               "error_message only reaches GET /api/v1/system/tasks/<task_id> (runtime.exception)")
    elif extra:
        R.info(f"file record text fields: {short(extra)}")
    task = get_task(api, fe.get("task_id")) if fe.get("task_id") is not None else None
    exc = ((task or {}).get("runtime") or {}).get("exception") or ""
    shown = next((str(rec[k]) for k in rec if ("error" in k or "message" in k) and rec[k]), "") or exc
    R.check(f"[{kb.label}] {name}: our error message is visible through the API",
            bool(shown.strip()) and shown.strip() != GENERIC_FAIL,
            f"task {fe.get('task_id')} exception={exc!r}" if task else f"task {fe.get('task_id')} not found")


def check_retrieval_settings(api: Api, kb: KB, sc: dict, rs: dict, kbs: list[KB]) -> None:
    q = sc["settings_query"]

    def put(settings: dict, label: str) -> bool:
        s, b = api.call("PUT", f"/api/v1/knowledge/bases/{kb.uuid}",
                        {"name": f"lucidrag-e2e-{kb.label}", "description": f"LucidRAG E2E knowledge base {kb.label}",
                         "retrieval_settings": settings})
        ok = R.check(f"[{kb.label}] PUT retrieval_settings {label}", ok_body(s, b), f"HTTP {s} {short(b)}" if not ok_body(s, b) else "")
        s, b = api.call("GET", f"/api/v1/knowledge/bases/{kb.uuid}")
        got = (((b.get("data") or {}).get("base") or {}).get("retrieval_settings")) if ok_body(s, b) else None
        return R.check(f"[{kb.label}] GET shows the stored retrieval_settings {label}", ok and got == settings, short(got))

    if put(dict(rs, top_k=1), "top_k=1"):
        ok, res, err = retrieve(api, kb, q["query"])
        R.check(f"[{kb.label}] stored top_k=1 -> exactly 1 result, from {q['expect_file']}",
                ok and len(res) == 1 and hit_ok(res, kb, q["expect_file"], q["expect_text"]), err or fmt_hits(res, kbs))
        ok, res, err = retrieve(api, kb, q["query"], {"top_k": 3})
        R.check(f"[{kb.label}] per-request top_k=3 overrides the stored 1", ok and len(res) == 3, err or f"{len(res)} results")
    if put(dict(rs, score_threshold=0.99), "score_threshold=0.99"):
        ok, res, err = retrieve(api, kb, q["query"])
        R.check(f"[{kb.label}] stored score_threshold=0.99 -> 0 results", ok and not res, err or fmt_hits(res, kbs))
    kq = sc.get("keyword_query")
    if kq and "search_mode" in rs and put(dict(rs, search_mode="keyword"), "search_mode=keyword"):
        ok, res, err = retrieve(api, kb, kq["query"])
        R.check(f"[{kb.label}] keyword mode: '{kq['query'][:30]}' -> {kq['expect_file']} first",
                ok and bool(res) and hit_ok(res[:1], kb, kq["expect_file"], kq["expect_text"]), err or fmt_hits(res, kbs))
    if "search_mode" in rs and put(dict(rs, search_mode="vector"), "search_mode=vector"):
        ok, res, err = retrieve(api, kb, q["query"])
        R.check(f"[{kb.label}] vector mode: '{q['query'][:30]}' -> {q['expect_file']} in top 5",
                ok and hit_ok(res[:5], kb, q["expect_file"], q["expect_text"]), err or fmt_hits(res, kbs))
    put(rs, "back to the defaults")


# ----------------------------------------------------------------------------- main


def wait_terminal(api: Api, kb_uuid: str, files: dict[str, dict], pending: set[str], timeout_s: float) -> set[str]:
    """Poll the KB's file list until every file named in `pending` is terminal, filling each entry's
    rec / seen (status history) / secs. Returns the names still not terminal at the timeout."""
    pending = set(pending)
    deadline = time.time() + timeout_s
    while pending and time.time() < deadline:
        by_upload = {r.get("file_name"): r for r in (list_files(api, kb_uuid) or [])}
        for name in list(pending):
            fe = files[name]
            rec = by_upload.get(fe["upload_id"])
            if rec is None:
                continue
            fe["rec"] = rec
            st = rec.get("status")
            if not fe["seen"] or fe["seen"][-1] != st:
                fe["seen"].append(st)
            if st in TERMINAL:
                fe["secs"] = time.time() - fe["t0"]
                pending.discard(name)
        if pending:
            time.sleep(0.5)
    return pending


def wait_api(api: Api, timeout: float) -> bool:
    t0 = time.time()
    while time.time() - t0 < timeout:
        s, _ = api.call("GET", "/api/v1/user/init", timeout=5)
        if s == 200:
            return True
        time.sleep(0.5)
    return False


def stats_line(embed: Api) -> str:
    s, st = embed.call("GET", "/stats", timeout=5)
    tpr = (st or {}).get("texts_per_request") or [] if s == 200 and isinstance(st, dict) else []
    if not tpr:
        return "0 requests"
    return (f"{st['requests']} requests, {st['texts']} texts, texts/request max={max(tpr)} "
            f"mean={sum(tpr) / len(tpr):.1f} ({st.get('model')})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", default="http://127.0.0.1:5300")
    ap.add_argument("--embed-url", default="http://127.0.0.1:5600")
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--lbp", default="lbp", help="lbp of the plugin venv")
    ap.add_argument("--debug-url", default="")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--plugin-log", default="")
    ap.add_argument("--plugin-pid-file", default="")
    ap.add_argument("--backend", default="chroma", choices=("chroma", "milvus", "seekdb"))
    ap.add_argument("--chroma-path", default="")
    ap.add_argument("--milvus-uri", default="")
    ap.add_argument("--seekdb-path", default="")
    ap.add_argument("--langbot-pid-file", default="", help="to stop LangBot before reading an embedded DB")
    ap.add_argument("--scores-file", default="", help="JSON shared by the runs on several backends")
    ap.add_argument("--llm-url", default="", help="scripts/offline_llm.py; enables the pipeline stage")
    ap.add_argument("--browser-python", default="", help="a Python with Playwright: runs tests/e2e/browser.py")
    ap.add_argument("--browser-shots", default="", help="browser.py's screenshot folder")
    ap.add_argument("--pg-socket-dir", default="", help="LangBot runs on PostgreSQL there: the postgres.* checks")
    ap.add_argument("--pg-port", type=int, default=5432)
    ap.add_argument("--pg-db", default="langbot")
    ap.add_argument("--pg-user", default="langbot")
    ap.add_argument("--psql", default="psql")
    ap.add_argument("--langbot-sqlite", default="", help="the SQLite file LangBot must not create on PostgreSQL")
    ap.add_argument("--user", default="e2e@lucidrag.invalid")
    ap.add_argument("--password", default="e2e-Passw0rd!")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    with open(args.scenario, encoding="utf-8") as f:
        sc = json.load(f)
    NEVER_TEXT.extend(sc.get("never_text") or [])
    api, embed, plugin = Api(args.base_url), Api(args.embed_url), PluginProc()
    t_start = time.time()
    try:
        journey(args, sc, api, embed, plugin)
    except Abort as e:
        R.info(f"stopped after a failed prerequisite: {e}")
    except Exception as e:  # noqa: BLE001  a bug here must still give a FAIL line
        R.check("driver ran without an exception", False, repr(e))
        import traceback
        traceback.print_exc()
    finally:
        plugin.stop()
    if api.token:  # the runtime stages (8 concurrent uploads, flaky embedder, lbp run killed)
        import runtime_stages

        runtime_stages.run(sys.modules[__name__], args, api, embed, plugin, R)
        plugin.stop()
    print(f"embedder stats (whole run): {stats_line(embed)}", flush=True)
    for n in R.notes:
        print(f"host behaviour: {n}", flush=True)
    print(f"drive.py took {time.time() - t_start:.1f}s", flush=True)
    if R.fail_names:
        print("failed checks: " + "; ".join(R.fail_names), flush=True)
    print(f"{R.passed} passed, {R.failed} failed", flush=True)
    return 0 if R.failed == 0 and R.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
