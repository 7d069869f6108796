"""What the console shows of a failed upload (lucidrag/state/failures.py): its format, size, time
and title, newest first, also for failure records an earlier release wrote.

LangBot shows a failed upload only as "Failed"; the console is where the operator reads why and
tells two failed uploads apart. Written against the survivors of a mutation run of failures.py
(docs/TESTING.md).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from components.pages.console.console import LucidRagConsole
from lucidrag.state import failures
from lucidrag.state.failures import failed_file_name, list_failures, record_failure, size_label, upload_format
from lucidrag.state.storage_keys import failure_key
from tests.conftest import FakePlugin, Harness
from tests.test_console import ConsoleHost, api, create_kb, rows

KB = "kb-failures"


@pytest.fixture
def utc_plus_8(monkeypatch: pytest.MonkeyPatch):
    """A server in China: local time is UTC+8."""
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def console_with_failures(uploads: list[tuple[str, bytes]]) -> tuple[ConsoleHost, LucidRagConsole, list[str]]:
    host = ConsoleHost()
    harness = Harness(host)
    page = LucidRagConsole()
    page.plugin = host  # type: ignore[assignment]
    await create_kb(harness, host, KB)
    host.fail("vector_upsert", error=RuntimeError("disk full"))  # every upload fails
    ids = []
    for name, data in uploads:
        ids.append((await harness.ingest(KB, name, data)).document_id)
        time.sleep(0.002)  # one after the other, as an operator uploads
    return host, page, ids


async def test_a_failed_upload_shows_its_format_size_upload_time_and_langbot_file_newest_first(utc_plus_8):
    started = time.time()
    uploads = [("Report.PDF", b"%PDF-1.4 " + b"x" * 2000), ("README", b"plain words " * 5),
               ("notes.txt", b"y" * (3 * 1024 * 1024))]
    host, page, ids = await console_with_failures(uploads)
    detail = await api(page, "/kb", kb_id=KB)
    assert "files" in detail, detail
    listed = [r for r in detail["files"] if r["status"] == "failed"]
    assert [r["file_id"] for r in listed] == ids[::-1], "newest first"
    by_id = rows({"files": listed})
    langbot_files = {path.rsplit("/", 1)[-1]: len(data) for path, data in host.files.items()}
    for file_id, (name, data), fmt in zip(ids, uploads, ("pdf", "", "txt")):
        row = by_id[file_id]
        assert row["status"] == "failed" and row["reason"]
        assert row["format"] == fmt and row["size"] == len(data)
        assert langbot_files[row["langbot_file"]] == len(data)
        assert started <= row["failed_at"] <= time.time()
        assert row["title"] == failed_file_name(fmt, len(data), row["failed_at"])
    gmt = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(by_id[ids[0]]["failed_at"]))
    assert by_id[ids[0]]["title"] == f"PDF file, 2.0 KB, {gmt} UTC"  # UTC, not the server's time
    assert by_id[ids[1]]["title"].startswith("UNKNOWN file, 60 bytes, ")
    assert by_id[ids[2]]["title"].startswith("TXT file, 3.0 MB, ")


async def test_a_failure_record_an_earlier_release_wrote_is_shown_with_what_it_has():
    host, page, ids = await console_with_failures([("a.pdf", b"%PDF-1.4 new")])
    host.storage[failure_key(KB, "old-upload")] = json.dumps({"file_id": "old-upload", "reason": "It broke."}).encode()
    detail = await api(page, "/kb", kb_id=KB)
    assert "files" in detail, detail
    listed = [r for r in detail["files"] if r["status"] == "failed"]
    assert [r["file_id"] for r in listed] == [ids[0], "old-upload"]
    old = listed[1]
    assert (old["title"], old["format"], old["failed_at"], old["langbot_file"], old["size"]) == ("", "", 0.0, "", 0)
    assert old["reason"] == "It broke." and old["status"] == "failed"


@pytest.mark.parametrize(("size", "label"), [
    (0, "0 bytes"), (1023, "1023 bytes"), (1024, "1.0 KB"), (1536, "1.5 KB"), (1024 * 1024 - 1, "1024.0 KB"),
    (1024 * 1024, "1.0 MB"), (1024 * 1024 + 1024 * 1024 // 2, "1.5 MB"), (100 * 1024 * 1024, "100.0 MB"),
])
def test_sizes_are_labelled_in_bytes_kb_and_mb(size: int, label: str):
    assert size_label(size) == label


@pytest.mark.parametrize(("key", "fmt"), [
    ("v1/kb-1/3f2a.PDF", "pdf"), ("3f2a.docx", "docx"), ("v1/kb-1/archive.tar.gz", "gz"),
    ("v1/kb.v2/README", ""), ("README", ""), ("", ""),
])
def test_the_format_is_the_extension_of_the_langbot_storage_key(key: str, fmt: str):
    assert upload_format(key) == fmt


async def test_the_langbot_file_of_a_failure_is_the_last_part_of_its_storage_key(harness: Harness, host: FakePlugin):
    for file_id, key in (("a", "v1/kb/3f2a.pdf"), ("b", "3f2a.docx"), ("c", "")):
        assert await harness.invoke(record_failure, host, KB, file_id, "It broke.", key)
    listed = await harness.invoke(list_failures, host, KB, list(host.storage))
    assert {(f.file_id, f.upload_key, f.format) for f in listed} == {("a", "3f2a.pdf", "pdf"), ("b", "3f2a.docx", "docx"),
                                                                      ("c", "", "")}


async def test_an_upload_returns_its_result_when_plugin_storage_hangs(harness: Harness, host: FakePlugin,
                                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(failures, "OUTCOME_TIMEOUT_S", 0.2)
    host.fail("vector_upsert", error=RuntimeError("disk full"))
    host.hang("set_plugin_storage", when=lambda key, **_: "/failed/" in key)
    result = await asyncio.wait_for(harness.ingest(KB, "a.txt", b"Some words."), 60)
    assert result.status.value == "failed" and "disk full" in result.error_message


async def test_a_failed_upload_is_listed_once_as_failed_not_also_as_interrupted():
    """Bug: an upload the vector DB refused keeps its journal entry until the next hook reconciles
    it; the console listed it a second time as "interrupted" (and counted it so), which LangBot
    does not show."""
    host, page, (failed,) = await console_with_failures([("notes.txt", b"Some words.")])
    assert any(f"/journal/{failed}" in key for key in host.storage)  # reconciled by a later hook
    detail = await api(page, "/kb", kb_id=KB)
    assert [(r["file_id"], r["status"]) for r in detail["files"]] == [(failed, "failed")]
    assert detail["health"]["failed_files"] == 1 and detail["health"]["interrupted_files"] == []
    (row,) = (await api(page, "/overview"))["knowledge_bases"]
    assert (row["failed"], row["interrupted"]) == (1, 0)
