"""The bot keeps answering while files are uploaded: a query's and a delete's CPU work never waits
behind parsing, OCR or an upload's other steps (base/blocking.py's lanes, base/workers.py's
parse workers).

Each test holds the upload work -- in worker threads on a threading.Event, or in every parse
worker process until a file exists (as a long scan's OCR holds them for minutes) -- and asks
questions in every mode and deletes files, on the uploading KB and on another one. They must all
complete while the uploads are still held; only then are the uploads let go, and they complete too.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

import lucidrag.ingestion.ingest as ingest
from lucidrag.base import blocking, workers
from lucidrag.ingestion import isolation
from tests import worker_readers
from tests.conftest import Harness
from tests.test_engine import SOLAR, TEA

UPLOADING = "kb-uploading"
OTHER = "kb-other"
MODES = ("keyword", "vector", "hybrid")
# Only bounds how long a broken build hangs before the test reports it; never met when it passes.
HANG_S = 120


class Gate:
    """Wraps a blocking function so that each call tells the loop it started, then waits until
    the gate opens."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._opened = threading.Event()
        self._started: asyncio.Queue[None] = asyncio.Queue()

    def hold(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any, **kwargs: Any) -> Any:
            self._loop.call_soon_threadsafe(self._started.put_nowait, None)
            self._opened.wait()
            return fn(*args, **kwargs)
        return held

    async def started(self, count: int) -> None:
        async def wait() -> None:
            for _ in range(count):
                await self._started.get()
        await asyncio.wait_for(wait(), HANG_S)

    def open(self) -> None:
        self._opened.set()

    def install(self, monkeypatch: pytest.MonkeyPatch, step: str = "file_record") -> None:
        """Holds `step`, a function ingest.py calls."""
        monkeypatch.setattr(ingest, step, self.hold(getattr(ingest, step)))

    def upload(self, data: bytes) -> bytes:
        return data


class WorkerGate:
    """Holds the parse workers' reading (tests/worker_readers.held): each upload names a file
    that the reader waits for, and says it started with a file of its own."""

    def __init__(self, folder: Path) -> None:
        self._release = folder / "release"

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(isolation, "read_upload", worker_readers.held)

    def upload(self, data: bytes) -> bytes:
        return f"{self._release}\n".encode() + data

    async def started(self, count: int) -> None:
        folder = self._release.parent
        for _ in range(HANG_S * 100):
            if len(list(folder.glob("release.*.started"))) >= count:
                return
            await asyncio.sleep(0.01)
        raise TimeoutError(f"fewer than {count} readers started")

    def open(self) -> None:
        self._release.touch()


async def answers_while_uploads_are_held(harness: Harness, monkeypatch: pytest.MonkeyPatch,
                                         gate: Gate | WorkerGate, uploads: int, held: int) -> None:
    """Start `uploads` uploads into UPLOADING held by `gate` (installed by the caller); once
    `held` of them are held, ask in every mode and delete a file on both KBs: everything must
    complete before the gate opens."""
    kept = {kb: await harness.ingest(kb, "solar.txt", SOLAR) for kb in (UPLOADING, OTHER)}
    doomed = {kb: await harness.ingest(kb, "tea.txt", TEA) for kb in (UPLOADING, OTHER)}
    gate.install(monkeypatch)
    running = [asyncio.ensure_future(harness.ingest(UPLOADING, f"scan-{i}.txt", gate.upload(TEA + b" Scan %d." % i)))
               for i in range(uploads)]
    try:
        await gate.started(held)
        questions = {(kb, mode): asyncio.ensure_future(harness.texts(kb, "solar array kilowatts",
                                                                     settings={"search_mode": mode}))
                     for kb in (UPLOADING, OTHER) for mode in MODES}
        deletes = {kb: asyncio.ensure_future(harness.component.delete_document(kb, doomed[kb].document_id))
                   for kb in (UPLOADING, OTHER)}
        _, waiting = await asyncio.wait([*questions.values(), *deletes.values()], timeout=HANG_S)
        assert not waiting, "a query or a delete waited behind the uploads"
        assert not any(upload.done() for upload in running)  # they were held all along
    finally:
        gate.open()
    for (kb, mode), texts in questions.items():
        assert "42 kilowatts" in texts.result()[0], (kb, mode)
    assert all(deleted.result() is True for deleted in deletes.values())
    for kb in (UPLOADING, OTHER):
        assert not harness.host.vectors_of(kb, doomed[kb].document_id)
        assert harness.host.vectors_of(kb, kept[kb].document_id)
    results = await asyncio.gather(*running)
    assert [r.status for r in results] == [DocumentStatus.COMPLETED] * uploads


LANES = workers.GENERAL_LANES + workers.QUICK_LANES


async def test_questions_and_deletes_are_answered_while_every_parse_worker_reads_a_scan(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    await answers_while_uploads_are_held(harness, monkeypatch, WorkerGate(tmp_path), uploads=LANES + 1, held=LANES)


async def test_questions_and_deletes_are_answered_while_uploads_build_their_records(
        harness: Harness, monkeypatch: pytest.MonkeyPatch):
    await answers_while_uploads_are_held(harness, monkeypatch, Gate(), uploads=3, held=blocking.UPLOAD_SLOTS_PER_SCOPE)


async def test_a_parse_takes_none_of_the_workspaces_executor_slots(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """With every parse worker held, the workspace can still run as many blocking jobs at once as
    the SDK allows it (4): parsing leaves the runtime's workers and the workspace's share of them,
    which the SDK's own message encoding also needs, to everything else."""
    gate = WorkerGate(tmp_path)
    gate.install(monkeypatch)
    running = [asyncio.ensure_future(harness.ingest(UPLOADING, f"scan-{i}.txt", gate.upload(TEA)))
               for i in range(LANES)]
    try:
        await gate.started(LANES)
        inner = threading.Barrier(4)

        async def four_jobs_at_once() -> list[int]:
            return list(await asyncio.gather(*(asyncio.to_thread(inner.wait, HANG_S) for _ in range(4))))
        assert sorted(await harness.invoke(four_jobs_at_once)) == [0, 1, 2, 3]
    finally:
        gate.open()
    assert [r.status for r in await asyncio.gather(*running)] == [DocumentStatus.COMPLETED] * LANES
