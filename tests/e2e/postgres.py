"""The PostgreSQL checks of the real-host journey (hooks in drive.py, `[PASS] postgres.*` lines).

run.sh starts a private PostgreSQL server (scripts/host_env.sh `host_pg_start`, Unix socket only)
and LangBot 4.11.2 with `database.use: postgresql` on it; drive.py then runs the usual journey and
calls these hooks. They read LangBot's database with psql, as an operator would, to show that
LangBot's own rows (knowledge_bases, knowledge_base_files) and LucidRAG's plugin storage
(binary_storages, owner `lucidrag/lucid-rag`) live in PostgreSQL, follow each step of the journey,
and are gone after the deletes.
"""

from __future__ import annotations

import os
import subprocess
import time

PLUGIN_OWNER = "lucidrag/lucid-rag"  # LangBot keys plugin storage by "<author>/<name>"
KEY_ROOT = "lucidrag/v1/kb/"  # lucidrag/state/storage_keys.py


class Pg:
    def __init__(self, psql: str, socket_dir: str, port: int, db: str, user: str) -> None:
        self.cmd = [psql, "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-h", socket_dir,
                    "-p", str(port), "-U", user, "-d", db]

    def rows(self, sql: str, *params: str) -> tuple[list[list[str]] | None, str]:
        """Run one query; params are bound as psql variables :'p1', :'p2', ... (quoted literals)."""
        cmd = list(self.cmd)
        for i, p in enumerate(params, 1):
            cmd += ["-v", f"p{i}={p}"]
        try:
            proc = subprocess.run(cmd, input=sql, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, repr(e)
        if proc.returncode != 0:
            return None, proc.stderr.strip()[-300:]
        return [line.split("\t") for line in proc.stdout.splitlines() if line], ""

    def one(self, sql: str, *params: str) -> tuple[list[str] | None, str]:
        rows, err = self.rows(sql, *params)
        return (rows[0] if rows else None), err


def _storage(pg: Pg, kb_uuid: str, sub: str = "") -> tuple[int | None, int | None, str]:
    """(rows, bytes) of LucidRAG's plugin storage under lucidrag/v1/kb/<kb>/<sub>."""
    row, err = pg.one("SELECT count(*), coalesce(sum(length(value)), 0) FROM binary_storages "
                      "WHERE owner_type = 'plugin' AND owner = :'p1' AND key LIKE :'p2'",
                      PLUGIN_OWNER, f"{KEY_ROOT}{kb_uuid}/{sub}%")
    if row is None:
        return None, None, err
    return int(row[0]), int(row[1]), ""


def new_stage(args, report):
    """A Pg for the journey, or None when LangBot does not run on PostgreSQL."""
    if not args.pg_socket_dir:
        return None
    return {"pg": Pg(args.psql, args.pg_socket_dir, args.pg_port, args.pg_db, args.pg_user), "r": report,
            "sqlite": args.langbot_sqlite}


def after_kb_created(stage, kb) -> None:
    pg, r = stage["pg"], stage["r"]
    row, err = pg.one("SELECT count(*) FROM knowledge_bases WHERE uuid = :'p1'", kb.uuid)
    r.check(f"postgres.KB {kb.label}'s row is in PostgreSQL (knowledge_bases)", row == ["1"], err or f"rows={row}")
    r.check("postgres.LangBot made no SQLite database", not os.path.exists(stage["sqlite"]), stage["sqlite"])


def after_ingest(stage, kb) -> None:
    """Every completed file has its row in knowledge_base_files and its FileRecord in binary_storages."""
    pg, r = stage["pg"], stage["r"]
    done = {fe["rec"]["uuid"]: n for n, fe in kb.files.items() if (fe.get("rec") or {}).get("status") == "completed"}
    rows, err = pg.rows("SELECT uuid, status FROM knowledge_base_files WHERE kb_id = :'p1'", kb.uuid)
    in_db = {u: s for u, s in (rows or [])}
    r.check(f"postgres.[{kb.label}] knowledge_base_files has each completed file as completed ({len(done)})",
            rows is not None and all(in_db.get(u) == "completed" for u in done) and bool(done),
            err or f"{len(in_db)} rows: " + ", ".join(f"{done.get(u, u)}={s}" for u, s in in_db.items())[:300])
    missing = []
    for u, name in done.items():
        n, _, err = _storage(pg, kb.uuid, f"file/{u}")
        if not n:
            missing.append(f"{name} ({err or 'no row'})")
    total, size, err = _storage(pg, kb.uuid)
    r.check(f"postgres.[{kb.label}] LucidRAG's plugin storage is in binary_storages: a record per completed file",
            total is not None and not missing,
            err or (f"{total} rows, {size} bytes under {KEY_ROOT}{kb.uuid}/"
                    + (f"; no record for {missing}" if missing else "")))
    kw, _, err = _storage(pg, kb.uuid, "kw/")
    r.check(f"postgres.[{kb.label}] the keyword index is in binary_storages", bool(kw), err or f"{kw} rows under kw/")


def after_file_delete(stage, kb, file_uuid: str, name: str) -> None:
    n, _, err = _storage(stage["pg"], kb.uuid, f"file/{file_uuid}")
    stage["r"].check(f"postgres.[{kb.label}] {name}'s record is gone from binary_storages", n == 0,
                     err or f"{n} rows left")
    row, err = stage["pg"].one("SELECT count(*) FROM knowledge_base_files WHERE uuid = :'p1'", file_uuid)
    stage["r"].check(f"postgres.[{kb.label}] {name}'s row is gone from knowledge_base_files", row == ["0"],
                     err or f"rows={row}")


def after_kb_deletes(stage, kbs, wait_s: float = 30) -> None:
    """Nothing of a deleted KB is left in LangBot's database: its rows and LucidRAG's storage keys."""
    pg, r = stage["pg"], stage["r"]
    for kb in kbs:
        t0, n, size, err = time.time(), None, None, ""
        while time.time() - t0 < wait_s:  # the hook finishes what one call could not on a later one
            n, size, err = _storage(pg, kb.uuid)
            if n == 0 or n is None:
                break
            time.sleep(1)
        r.check(f"postgres.KB {kb.label}: no plugin-storage rows left in binary_storages", n == 0,
                err or f"{n} rows, {size} bytes left after {time.time() - t0:.0f}s")
        row, err = pg.one("SELECT (SELECT count(*) FROM knowledge_bases WHERE uuid = :'p1'), "
                          "(SELECT count(*) FROM knowledge_base_files WHERE kb_id = :'p1')", kb.uuid)
        r.check(f"postgres.KB {kb.label}: no rows left in knowledge_bases / knowledge_base_files",
                row == ["0", "0"], err or f"rows={row}")
    row, err = pg.one("SELECT pg_database_size(current_database())")
    if row:
        r.info(f"LangBot's PostgreSQL database after the journey: {int(row[0]) / 2**20:.1f} MiB")
