#!/usr/bin/env python3
"""The real-host scale run: one LucidRAG knowledge base of N chunks through a real LangBot
4.11.2 (database SQLite or PostgreSQL, vector DB Chroma), measured from outside as an operator sees it.

Run by bench/scale_real_host.sh (venvs, the PostgreSQL server, the private network namespace);
this script runs inside that namespace with the LangBot venv's Python and starts everything else
itself: the offline hash embedder (`offline-embed-d256`, an OpenAI-compatible server), `lbp rt`,
LangBot, and `lbp run` for a copy of the plugin. Then, for --chunks N (scale_corpus.py's files, 20
chunks each, as Markdown with one heading per chunk, as bench/bench_scale.py uploads them):

  ingest     every file uploaded the way the web UI does (POST /files/documents, then
             POST /knowledge/bases/<kb>/files), at most --inflight at once (LangBot admits 8 per
             workspace): wall, chunks/s, CPU seconds of each process (the plugin's share of the stack's
             CPU), plugin-storage rows and bytes, the bytes written to plugin storage over the whole
             build (a trigger on LangBot's binary_storages table adds up every written value), LangBot's
             DB and Chroma growth, the plugin's RSS
  restart    `lbp run` restarted, then LangBot restarted: wall of the first query on the big KB after
             each, and the longest delay a probe query on a one-file KB saw meanwhile (the plugin
             serves both on one event loop, so a probe waits as long as the loop is blocked)
  queries    --queries per mode (vector, keyword, hybrid): wall p50/p95 through LangBot's HTTP API and
             the plugin's CPU per query
  delete     one file (wall; its record row and its text gone), then the KB (wall; until its storage
             rows are gone; its rows, and, with LangBot stopped, its vectors in Chroma)

Prints one JSON line `RESULT {...}` and a table; --out writes the JSON too.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(HERE))

import drive  # noqa: E402  tests/e2e/drive.py: Api, PluginProc, schema helpers, vectors_left
from bench.lib.scale_corpus import CHUNKS_PER_FILE, generate_file, make_queries  # noqa: E402

PLUGIN_OWNER = "lucidrag/lucid-rag"
KEY_ROOT = "lucidrag/v1/kb/"
EMBED_MODEL = "offline-embed-d256"  # the hash embedder at 256 dimensions (scripts/offline_embed.py)
CLK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def markdown_file(n: int) -> bytes:
    return "\n\n".join(f"## Part {n}-{j}\n\n{text}" for j, (_, text) in enumerate(generate_file(n))).encode()


def p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


# ----------------------------------------------------------------------------- processes


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()  # fields from 3 (state) on


def group_pids(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st and int(st[2]) == pgid and st[0] != "Z":  # field 5: pgrp; a zombie is gone
                out.append(int(d))
    return out


def children_of(ppid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st and int(st[1]) == ppid:  # field 4: ppid
                out.append(int(d))
    return out


def cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        st = _stat(pid)
        if st:
            total += int(st[11]) + int(st[12])  # utime, stime
    return total / CLK


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except OSError:
            pass
    return total / 2**20


class Services:
    """The processes of the stack, each in its own session (pid = process group)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs = Path(args.run_dir) / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, cmd: list[str], cwd: str, env: dict | None = None) -> None:
        logf = open(self.logs / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(cmd, cwd=cwd, env=dict(os.environ, **(env or {})), stdout=logf,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def stop(self, name: str, grace: float = 15) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            t0 = time.time()
            while time.time() - t0 < wait and (proc.poll() is None or group_pids(proc.pid)):
                time.sleep(0.2)
            if not group_pids(proc.pid):
                break

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name, 5)

    def pids(self, name: str) -> list[int]:
        proc = self.procs.get(name)
        return group_pids(proc.pid) if proc else []

    def log_text(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_log(self, name: str, needle: str, timeout: float) -> bool:
        t0 = time.time()
        while time.time() - t0 < timeout:
            if needle in (self.logs / f"{name}.log").read_text(errors="replace"):
                return True
            if self.procs[name].poll() is not None:
                return False
            time.sleep(0.25)
        return False


# ----------------------------------------------------------------------------- LangBot's database


class Db:
    """LangBot's database, read (and, for the write counter, given a trigger) as an operator would."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.pg = bool(args.pg_socket_dir)
        self.args = args
        self.sqlite_path = Path(args.run_dir) / "langbot" / "data" / "langbot.db"

    def sql(self, statement: str) -> list[list[str]]:
        if self.pg:
            a = self.args
            proc = subprocess.run([a.psql, "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-h",
                                   a.pg_socket_dir, "-p", str(a.pg_port), "-U", a.pg_user, "-d", a.pg_db],
                                  input=statement, capture_output=True, text=True, timeout=300)
            if proc.returncode:
                raise RuntimeError(proc.stderr.strip())
            return [ln.split("\t") for ln in proc.stdout.splitlines() if ln]
        con = sqlite3.connect(str(self.sqlite_path), timeout=60)
        try:
            rows = []
            for part in [s for s in statement.split(";\n") if s.strip()]:
                rows = [[str(x) for x in r] for r in con.execute(part).fetchall()]
            con.commit()
            return rows
        finally:
            con.close()

    def install_write_counter(self) -> None:
        """A trigger that adds up every value written to LucidRAG's plugin storage (insert + update)."""
        if self.pg:
            self.sql("""CREATE TABLE IF NOT EXISTS lucidrag_scale_writes (n bigint, bytes bigint);
INSERT INTO lucidrag_scale_writes SELECT 0, 0 WHERE NOT EXISTS (SELECT 1 FROM lucidrag_scale_writes);
CREATE OR REPLACE FUNCTION lucidrag_scale_count() RETURNS trigger AS $$ BEGIN
  IF NEW.owner = 'lucidrag/lucid-rag' THEN
    UPDATE lucidrag_scale_writes SET n = n + 1, bytes = bytes + length(NEW.value); END IF;
  RETURN NEW; END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS lucidrag_scale_count ON binary_storages;
CREATE TRIGGER lucidrag_scale_count AFTER INSERT OR UPDATE OF value ON binary_storages
  FOR EACH ROW EXECUTE FUNCTION lucidrag_scale_count();""")
        else:
            self.sql("""CREATE TABLE IF NOT EXISTS lucidrag_scale_writes (n INTEGER, bytes INTEGER);
INSERT INTO lucidrag_scale_writes SELECT 0, 0 WHERE NOT EXISTS (SELECT 1 FROM lucidrag_scale_writes);
CREATE TRIGGER IF NOT EXISTS lucidrag_scale_ins AFTER INSERT ON binary_storages WHEN NEW.owner = 'lucidrag/lucid-rag'
  BEGIN UPDATE lucidrag_scale_writes SET n = n + 1, bytes = bytes + length(NEW.value); END;
CREATE TRIGGER IF NOT EXISTS lucidrag_scale_upd AFTER UPDATE OF value ON binary_storages WHEN NEW.owner = 'lucidrag/lucid-rag'
  BEGIN UPDATE lucidrag_scale_writes SET n = n + 1, bytes = bytes + length(NEW.value); END""")

    def writes(self) -> tuple[int, int]:
        n, b = self.sql("SELECT n, bytes FROM lucidrag_scale_writes")[0]
        return int(n), int(b)

    def storage(self, kb_uuid: str, sub: str = "") -> tuple[int, int]:
        like = f"{KEY_ROOT}{kb_uuid}/{sub}%"
        n, b = self.sql("SELECT count(*), coalesce(sum(length(value)), 0) FROM binary_storages "
                        f"WHERE owner = '{PLUGIN_OWNER}' AND key LIKE '{like}'")[0]
        return int(n), int(b)

    def largest_value(self) -> int:
        return int(self.sql("SELECT coalesce(max(length(value)), 0) FROM binary_storages "
                            f"WHERE owner = '{PLUGIN_OWNER}'")[0][0])

    def size(self) -> int:
        """LangBot's database on disk: pg_database_size, or the SQLite file and its WAL."""
        if self.pg:
            return int(self.sql("SELECT pg_database_size(current_database())")[0][0])
        return sum(os.path.getsize(p) for p in (self.sqlite_path, Path(str(self.sqlite_path) + "-wal"))
                   if p.exists())

    def breakdown(self) -> dict[str, int]:
        """Where the database's bytes are: the largest tables (PostgreSQL, with TOAST and indexes), or
        SQLite's free pages (space of overwritten values that the file keeps)."""
        if self.pg:
            return {r[0]: int(r[1]) for r in self.sql(
                "SELECT relname, pg_total_relation_size(relid) FROM pg_catalog.pg_statio_user_tables "
                "ORDER BY 2 DESC LIMIT 4")}
        free, page = self.sql("PRAGMA freelist_count")[0][0], self.sql("PRAGMA page_size")[0][0]
        return {"sqlite_free_pages": int(free) * int(page)}

    def rows_of_kb(self, kb_uuid: str) -> tuple[int, int]:
        a, b = self.sql(f"SELECT (SELECT count(*) FROM knowledge_bases WHERE uuid = '{kb_uuid}'), "
                        f"(SELECT count(*) FROM knowledge_base_files WHERE kb_id = '{kb_uuid}')")[0]
        return int(a), int(b)

    def server_pids(self) -> list[int]:
        if not self.pg:
            return []
        try:
            pid = int((Path(self.args.pg_socket_dir) / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        return [pid, *children_of(pid)]


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


# ----------------------------------------------------------------------------- the run


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sv = Services(args)
        self.db = Db(args)
        self.api = drive.Api("http://127.0.0.1:5300")
        self.plugin = drive.PluginProc()
        self.plugin_dir = str(Path(args.run_dir) / "plugin")
        self.lb_dir = str(Path(args.run_dir) / "langbot")
        self.out: dict = {"chunks": args.chunks, "db": "postgresql" if self.db.pg else "sqlite", "vdb": "chroma"}
        self.debug: dict = {}

    def log(self, msg: str) -> None:
        print(f"[scale +{time.time() - self.t0:.0f}s] {msg}", flush=True)

    # --- the stack
    def start_langbot(self) -> None:
        a = self.args
        env = {"VDB__USE": "chroma", "API__HOST": "127.0.0.1", "API__PORT": "5300",
               "PLUGIN__RUNTIME_WS_URL": "ws://127.0.0.1:5400/control/ws",
               "PLUGIN__DISPLAY_PLUGIN_DEBUG_URL": "ws://127.0.0.1:5401/plugin/debug/ws",
               "PLUGIN__ENABLE_MARKETPLACE": "false", "BOX__ENABLED": "false", "SPACE__DISABLE_TELEMETRY": "true",
               "SPACE__DISABLE_MODELS_SERVICE": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        if self.db.pg:
            env.update({"DATABASE__USE": "postgresql", "DATABASE__POSTGRESQL__HOST": a.pg_socket_dir,
                        "DATABASE__POSTGRESQL__PORT": str(a.pg_port), "DATABASE__POSTGRESQL__USER": a.pg_user,
                        "DATABASE__POSTGRESQL__PASSWORD": "", "DATABASE__POSTGRESQL__DATABASE": a.pg_db})
        self.sv.start("langbot", [f"{a.lb_venv}/bin/langbot"], self.lb_dir, env)

    def wait_api(self, timeout: float = 300) -> float:
        t0 = time.time()
        while time.time() - t0 < timeout:
            s, _ = self.api.call("GET", "/api/v1/user/init", timeout=5)
            if s == 200:
                return time.time() - t0
            if self.sv.procs["langbot"].poll() is not None:
                break
            time.sleep(0.5)
        raise SystemExit(f"LangBot did not come up (see {self.sv.logs}/langbot.log)")

    def login(self) -> None:
        s, b = self.api.call("GET", "/api/v1/user/init")
        if s == 200 and not b["data"].get("initialized"):
            self.api.call("POST", "/api/v1/user/init", {"user": "scale@lucidrag.invalid", "password": "Scale-Passw0rd!"})
        s, b = self.api.call("POST", "/api/v1/user/auth", {"user": "scale@lucidrag.invalid", "password": "Scale-Passw0rd!"})
        assert s == 200 and b.get("data", {}).get("token"), f"login failed: HTTP {s} {drive.short(b)}"
        self.api.token = b["data"]["token"]

    def start_plugin(self) -> float:
        """lbp run; seconds until LangBot lists the engine."""
        s, b = self.api.call("GET", "/api/v1/plugins/debug-info")
        self.debug = {"url": b["data"]["debug_url"], "key": b["data"]["plugin_debug_key"]}
        t0 = time.time()
        self.plugin.start(f"{self.args.pl_venv}/bin/lbp", self.plugin_dir, self.debug["url"], self.debug["key"],
                          str(self.sv.logs / "plugin.log"), None)
        self.plugin_id = drive.read_plugin_id(self.plugin_dir)
        while time.time() - t0 < 180 and self.plugin.alive():
            s, b = self.api.call("GET", "/api/v1/knowledge/engines")
            if s == 200 and any(e.get("plugin_id") == self.plugin_id for e in b["data"].get("engines", [])):
                self.engine = next(e for e in b["data"]["engines"] if e.get("plugin_id") == self.plugin_id)
                return time.time() - t0
            time.sleep(0.5)
        raise SystemExit("the plugin did not attach (see plugin.log)")

    def plugin_pids(self) -> list[int]:
        return group_pids(self.plugin.proc.pid) if self.plugin.alive() else []

    def cpu(self) -> dict[str, float | None]:
        """CPU seconds per process group; PostgreSQL's None where its postmaster.pid cannot be read
        from inside the namespace (root there cannot read the postgres user's 0600 files)."""
        pg = self.db.server_pids()
        return {"plugin": cpu_s(self.plugin_pids()), "langbot": cpu_s(self.sv.pids("langbot")),
                "lbp_rt": cpu_s(self.sv.pids("lbp_rt")), "embedder": cpu_s(self.sv.pids("embed")),
                "postgres": cpu_s(pg) if pg else None}

    # --- KBs and files
    def create_kb(self, name: str) -> str:
        cs = dict(drive.defaults(self.engine.get("creation_schema")))
        for item in drive.schema_items(self.engine.get("creation_schema")):
            if item.get("type") == "embedding-model-selector":
                cs[item["name"]] = self.embed_uuid
        cs.update({"chunking": "structure", "chunk_size": 512, "chunk_overlap": 0})
        rs = drive.defaults(self.engine.get("retrieval_schema"))
        s, b = self.api.call("POST", "/api/v1/knowledge/bases", {
            "name": name, "description": "scale run", "knowledge_engine_plugin_id": self.plugin_id,
            "creation_settings": cs, "retrieval_settings": rs})
        assert s == 200, f"create KB: HTTP {s} {drive.short(b)}"
        return b["data"]["uuid"]

    def add_files(self, kb: str, numbers: list[int]) -> dict[int, dict]:
        """Upload files n (at most --inflight ingesting at once); {n: file row} when all are done."""
        files_dir = Path(self.args.run_dir) / "files"
        files_dir.mkdir(exist_ok=True)
        todo, inflight, done = list(numbers), {}, {}
        last_note = time.time()
        while todo or inflight:
            while todo and len(inflight) < self.args.inflight:
                n = todo[0]
                path = files_dir / f"scale-{n:06d}.md"
                path.write_bytes(markdown_file(n))
                s, b = self.api.upload(str(path), path.name)
                assert s == 200, f"upload {path.name}: HTTP {s} {drive.short(b)}"
                upload_id = b["data"]["file_id"]
                s, b = self.api.call("POST", f"/api/v1/knowledge/bases/{kb}/files", {"file_id": upload_id})
                if s == 429:  # LangBot's 8 active ingestions per workspace
                    break
                assert s == 200, f"add {path.name}: HTTP {s} {drive.short(b)}"
                todo.pop(0)
                inflight[upload_id] = (n, (b.get("data") or {}).get("task_id"))
                path.unlink()
            time.sleep(0.2)
            for upload_id, (n, task_id) in list(inflight.items()):  # LangBot's task: done when terminal
                task = drive.get_task(self.api, task_id) if task_id is not None else None
                if task is None or (task.get("runtime") or {}).get("done"):
                    done[n] = upload_id
                    del inflight[upload_id]
            if time.time() - last_note > 30:
                last_note = time.time()
                self.log(f"  {len(done)}/{len(numbers)} files done")
        rows = {r.get("file_name"): r for r in (drive.list_files(self.api, kb) or [])}
        return {n: rows.get(upload_id, {"status": "<no row>"}) for n, upload_id in done.items()}
        return done

    def retrieve(self, kb: str, query: str, mode: str | None = None, top_k: int = 5) -> tuple[float, list[dict]]:
        rs = {"top_k": top_k, **({"search_mode": mode} if mode else {})}
        t0 = time.perf_counter()
        ok, res, err = drive.retrieve(self.api, drive.KB("x", kb), query, rs)
        wall = time.perf_counter() - t0
        if not ok:
            raise RuntimeError(f"retrieve failed: {err}")
        return wall, res

    def first_query_with_probes(self, kb: str, probe_kb: str, query: str, then: list[str] | None = None) -> dict:
        """Wall of one query on the big KB while a probe queries the one-file KB every 50 ms. With
        `then`: those queries on the big KB, one after another, until the plugin logs its keyword
        index loaded (the KB's own queries read it), the probe still running."""
        base = [self.retrieve(probe_kb, "pump impeller", "keyword")[0] for _ in range(5)]
        worst, stop = [0.0], threading.Event()

        def probe() -> None:
            api = drive.Api("http://127.0.0.1:5300")
            api.token = self.api.token
            while not stop.is_set():
                t0 = time.perf_counter()
                drive.retrieve(api, drive.KB("p", probe_kb), "pump impeller", {"top_k": 1, "search_mode": "keyword"})
                worst[0] = max(worst[0], time.perf_counter() - t0)
                time.sleep(0.05)

        th = threading.Thread(target=probe, daemon=True)
        loaded_log = f"kb={kb}: keyword index snapshot loaded"
        logged_before = self.sv.log_text("plugin").count(loaded_log)
        th.start()
        time.sleep(0.2)
        t0 = time.time()
        wall, res = self.retrieve(kb, query)
        out = {"wall_s": round(wall, 3), "hits": len(res), "probe_base_s": round(statistics.median(base), 3),
               "probe_max_s": round(worst[0], 3), "stall_s": round(max(0.0, worst[0] - statistics.median(base)), 3)}
        walls = [wall]
        while then and time.time() - t0 < 300 and self.sv.log_text("plugin").count(loaded_log) <= logged_before:
            walls.append(self.retrieve(kb, then[len(walls) % len(then)])[0])
        stop.set()
        th.join(timeout=60)
        if then:
            loaded = self.sv.log_text("plugin").count(loaded_log) > logged_before
            out.update({"index_loaded_s": round(time.time() - t0, 1) if loaded else None,
                        "queries_until_loaded": len(walls), "slowest_query_until_loaded_s": round(max(walls), 3),
                        "probe_max_until_loaded_s": round(worst[0], 3)})
        return out

    # --- the measurement
    def main(self) -> dict:
        a, out = self.args, self.out
        self.t0 = time.time()
        for name, cmd in (("embed", [f"{a.lb_venv}/bin/python", str(HERE / "offline_embed.py"), "--host", "127.0.0.1",
                                     "--port", "5600", "--model", "hash"]),
                          ("lbp_rt", [f"{a.lb_venv}/bin/lbp", "rt", "--ws-control-port", "5400", "--ws-debug-port",
                                      "5401", "--skip-deps-check"])):
            self.sv.start(name, cmd, self.lb_dir)
        assert self.sv.wait_log("lbp_rt", "server started on", 120), "lbp rt did not start"
        t = time.time()
        self.start_langbot()
        out["langbot_first_start_s"] = round(self.wait_api(), 1)
        self.login()
        self.log(f"LangBot up in {time.time() - t:.0f}s ({out['db']})")
        self.start_plugin()
        s, b = self.api.call("POST", "/api/v1/provider/models/embedding", {
            "name": EMBED_MODEL, "provider": {"requester": "openai-chat-completions",
                                              "base_url": "http://127.0.0.1:5600/v1", "api_keys": ["sk-offline"]},
            "extra_args": {}})
        assert s == 200, f"register embedder: {drive.short(b)}"
        self.embed_uuid = b["data"]["uuid"]

        probe_kb = self.create_kb("scale-probe")
        probe_file = Path(a.run_dir) / "probe.md"
        probe_file.write_text("## Pump\n\nThe pump impeller turns at 1450 rpm and moves 47 newton of thrust.\n")
        s, b = self.api.upload(str(probe_file), "probe.md")
        s, b = self.api.call("POST", f"/api/v1/knowledge/bases/{probe_kb}/files", {"file_id": b["data"]["file_id"]})
        kb = self.create_kb("scale-big")
        out["kb"] = kb
        self.db.install_write_counter()

        # ---- ingest
        n_files = a.chunks // CHUNKS_PER_FILE
        size0, chroma0, cpu0, w0 = self.db.size(), du(Path(self.lb_dir) / "data" / "chroma"), self.cpu(), \
            self.db.writes()
        t = time.time()
        self.log(f"ingesting {n_files} files ({a.chunks} chunks), {a.inflight} at once")
        rows = self.add_files(kb, list(range(n_files)))
        ingest_s = time.time() - t
        cpu1, w1 = self.cpu(), self.db.writes()
        statuses = {}
        for r in rows.values():
            statuses[r.get("status")] = statuses.get(r.get("status"), 0) + 1
        chunks = statuses.get("completed", 0) * CHUNKS_PER_FILE
        cpu_d = {k: round(cpu1[k] - cpu0[k], 1) if cpu1[k] is not None and cpu0[k] is not None else None
                 for k in cpu1}
        st_n, st_b = self.db.storage(kb)
        kw_n, kw_b = self.db.storage(kb, "kw/")
        out["ingest"] = {
            "files": statuses, "wall_s": round(ingest_s, 1), "chunks_per_s": round(chunks / ingest_s, 1),
            "cpu_s": cpu_d, "plugin_cpu_share": round(cpu_d["plugin"] / max(1e-9, sum(v for v in cpu_d.values() if v)), 3),
            "plugin_cpu_ms_per_chunk": round(1000 * cpu_d["plugin"] / max(1, chunks), 2),
            "storage_rows": st_n, "storage_bytes": st_b, "index_rows": kw_n, "index_bytes": kw_b,
            "storage_bytes_per_chunk": round(st_b / max(1, chunks), 1),
            "storage_writes": w1[0] - w0[0], "storage_bytes_written": w1[1] - w0[1],
            "written_over_stored": round((w1[1] - w0[1]) / max(1, st_b), 2),
            "largest_value_bytes": self.db.largest_value(),
            "db_growth_bytes": self.db.size() - size0,
            "db_growth_per_chunk": round((self.db.size() - size0) / max(1, chunks), 1),
            "db_breakdown": self.db.breakdown(),
            "chroma_growth_bytes": du(Path(self.lb_dir) / "data" / "chroma") - chroma0,
            "plugin_rss_mib": round(rss_mib(self.plugin_pids()), 1),
        }
        self.log(f"ingest: {json.dumps(out['ingest'])}")
        queries = make_queries(n_files * CHUNKS_PER_FILE, a.queries)

        # ---- first query after a plugin restart, then after a LangBot restart
        self.plugin.stop()
        attach = self.start_plugin()
        out["after_plugin_restart"] = {"attach_s": round(attach, 1),
                                       **self.first_query_with_probes(kb, probe_kb, queries[0][1],
                                                                      [q for _, q in queries[2:12]]),
                                       "plugin_rss_mib": round(rss_mib(self.plugin_pids()), 1)}
        self.log(f"after plugin restart: {out['after_plugin_restart']}")
        self.sv.stop("langbot", 30)
        t = time.time()
        self.start_langbot()
        up = self.wait_api()
        self.login()
        while time.time() - t < 180:  # the plugin stays attached to lbp rt; LangBot lists it again
            s, b = self.api.call("GET", "/api/v1/knowledge/engines")
            if s == 200 and any(e.get("plugin_id") == self.plugin_id for e in b["data"].get("engines", [])):
                break
            time.sleep(0.5)
        out["after_langbot_restart"] = {"langbot_up_s": round(up, 1), "engine_listed_s": round(time.time() - t, 1),
                                        **self.first_query_with_probes(kb, probe_kb, queries[1][1]),
                                        "plugin_rss_mib": round(rss_mib(self.plugin_pids()), 1)}
        self.log(f"after LangBot restart: {out['after_langbot_restart']}")

        # ---- queries per mode
        out["queries"] = {}
        for mode in ("vector", "keyword", "hybrid"):
            c0, walls, hits = cpu_s(self.plugin_pids()), [], 0
            for _, q in queries:
                wall, res = self.retrieve(kb, q, mode)
                walls.append(wall)
                hits += bool(res)
            c1 = cpu_s(self.plugin_pids())
            out["queries"][mode] = {"n": len(walls), "p50_ms": round(1000 * p(walls, 0.5), 1),
                                    "p95_ms": round(1000 * p(walls, 0.95), 1), "with_hits": hits,
                                    "plugin_cpu_ms_per_query": round(1000 * (c1 - c0) / len(walls), 1)}
        self.log(f"queries: {out['queries']}")

        # ---- delete one file, then the KB
        victim_n = n_files // 2
        victim = rows[victim_n]
        fact = generate_file(victim_n)[3][1]
        t = time.time()
        s, b = self.api.call("DELETE", f"/api/v1/knowledge/bases/{kb}/files/{victim['uuid']}")
        del_s = time.time() - t
        left, _ = self.db.storage(kb, f"file/{victim['uuid']}")
        _, res = self.retrieve(kb, fact, "keyword", 10)
        leaked = [r for r in res if drive.norm(fact) in drive.norm(drive.result_text(r))]
        out["delete_file"] = {"http": s, "wall_s": round(del_s, 2), "record_rows_left": left, "text_returned": len(leaked)}
        self.log(f"delete one file: {out['delete_file']}")
        size_before_delete = self.db.size()
        t = time.time()
        s, b = self.api.call("DELETE", f"/api/v1/knowledge/bases/{kb}", timeout=600)
        kb_del_s = time.time() - t
        # LucidRAG deletes the vectors in the hook and finishes the KB's storage keys with the next
        # requests of the installation: one retrieve on the probe KB per second stands for them
        after_hook = self.db.storage(kb)
        n, b_, requests = *after_hook, 0
        while n and time.time() - t < 600:
            self.retrieve(probe_kb, "pump impeller", "keyword")
            requests += 1
            time.sleep(1)
            n, b_ = self.db.storage(kb)
        out["delete_kb"] = {"http": s, "wall_s": round(kb_del_s, 1), "storage_empty_after_s": round(time.time() - t, 1),
                            "storage_left_after_hook": after_hook, "later_requests": requests,
                            "storage_rows_left": n, "storage_bytes_left": b_, "db_rows_left": self.db.rows_of_kb(kb),
                            "db_bytes_before": size_before_delete, "db_bytes_after": self.db.size()}
        self.api.call("DELETE", f"/api/v1/knowledge/bases/{probe_kb}")
        self.plugin.stop()
        self.sv.stop("langbot", 30)
        left, where = drive.vectors_left(str(Path(self.lb_dir) / "data" / "chroma"), kb)
        out["delete_kb"]["vectors_left"] = left if left is not None else where
        self.log(f"delete KB: {out['delete_kb']}")
        out["total_s"] = round(time.time() - self.t0, 1)
        return out


def table(r: dict) -> str:
    i, q = r["ingest"], r["queries"]
    pr, lr = r["after_plugin_restart"], r["after_langbot_restart"]
    lines = [
        f"| {r['chunks']} chunks, LangBot on {r['db']}, {r['vdb']} | value |", "|---|---|",
        f"| ingest | {i['wall_s']} s, **{i['chunks_per_s']} chunks/s**, files {i['files']} |",
        f"| CPU s (plugin / LangBot+Chroma / lbp rt / embedder / PostgreSQL) | {i['cpu_s']['plugin']} / "
        f"{i['cpu_s']['langbot']} / {i['cpu_s']['lbp_rt']} / {i['cpu_s']['embedder']} / {i['cpu_s']['postgres']}; "
        f"plugin share **{100 * i['plugin_cpu_share']:.1f} %**, {i['plugin_cpu_ms_per_chunk']} ms/chunk |",
        f"| plugin storage | {i['storage_rows']} rows, {i['storage_bytes'] / 2**20:.1f} MiB "
        f"({i['storage_bytes_per_chunk']} B/chunk; index {i['index_bytes'] / 2**20:.1f} MiB); largest value "
        f"{i['largest_value_bytes'] / 2**20:.2f} MiB |",
        f"| written to plugin storage over the build | {i['storage_writes']} writes, "
        f"{i['storage_bytes_written'] / 2**20:.1f} MiB = **{i['written_over_stored']} x** what is stored (x 4/3 in "
        f"base64 over both runtime hops) |",
        f"| LangBot DB growth | {i['db_growth_bytes'] / 2**20:.1f} MiB ({i['db_growth_per_chunk']} B/chunk; "
        + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in i["db_breakdown"].items())
        + f"); Chroma {i['chroma_growth_bytes'] / 2**20:.1f} MiB |",
        f"| plugin RSS after ingest / after restart | {i['plugin_rss_mib']} / {pr['plugin_rss_mib']} MiB |",
        f"| first query after plugin restart | **{pr['wall_s']} s** (attach {pr['attach_s']} s); longest probe delay "
        f"{pr['probe_max_s']} s (base {pr['probe_base_s']} s); keyword index loaded after "
        f"{pr.get('index_loaded_s')} s of queries on the KB ({pr.get('queries_until_loaded')}, slowest "
        f"{pr.get('slowest_query_until_loaded_s')} s), longest probe delay until then "
        f"{pr.get('probe_max_until_loaded_s')} s |",
        f"| first query after LangBot restart | **{lr['wall_s']} s** (LangBot up {lr['langbot_up_s']} s); longest probe "
        f"delay {lr['probe_max_s']} s (base {lr['probe_base_s']} s) |",
    ]
    for mode, m in q.items():
        lines.append(f"| {mode} p50 / p95 (wall, {m['n']} queries) | {m['p50_ms']} / **{m['p95_ms']} ms**; plugin CPU "
                     f"{m['plugin_cpu_ms_per_query']} ms/query |")
    d, k = r["delete_file"], r["delete_kb"]
    lines.append(f"| delete one file | HTTP {d['http']}, {d['wall_s']} s; record rows left {d['record_rows_left']}, "
                 f"text returned {d['text_returned']} |")
    lines.append(f"| delete the KB | HTTP {k['http']}, {k['wall_s']} s; storage rows/bytes left after the hook "
                 f"{k['storage_left_after_hook']}, empty after {k['storage_empty_after_s']} s and {k['later_requests']} "
                 f"later requests (rows left {k['storage_rows_left']}); DB rows left {k['db_rows_left']}; vectors left "
                 f"{k['vectors_left']} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--run-dir", required=True, help="holds langbot/ (data), plugin/ (a copy), logs/")
    ap.add_argument("--lb-venv", required=True)
    ap.add_argument("--pl-venv", required=True)
    ap.add_argument("--pg-socket-dir", default="")
    ap.add_argument("--pg-port", type=int, default=5432)
    ap.add_argument("--pg-db", default="langbot")
    ap.add_argument("--pg-user", default="langbot")
    ap.add_argument("--psql", default="psql")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    run = Run(args)
    try:
        result = run.main()
    finally:
        run.plugin.stop()
        run.sv.stop_all()
    print("RESULT " + json.dumps(result), flush=True)
    print(table(result), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
