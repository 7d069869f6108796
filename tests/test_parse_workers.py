"""One bad file hurts no one: every upload is read in a worker process (base/workers.py through
ingestion/isolation.py) that is killed at the file's deadline, when its hook is cancelled or when
its knowledge base is deleted; a worker that dies fails only its file, and the plugin lives on.

The tests run the real ingest (tests/conftest.py's Harness) with the real worker processes. A
hostile reader is a test function put in place of `isolation.read_upload`, submitted through the
same pool (tests/worker_readers.py): it aborts, hangs, prints, reads the environment or asks for
too much memory inside the worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus

import components.knowledge_engine.lucid_rag as component
from lucidrag.base import limits, workers
from lucidrag.ingestion import isolation
from tests import worker_readers
from tests.samples import shared_content_pdf
from tests.conftest import Harness
from tests.test_engine import SOLAR, TEA

HOSTILE, OTHER, THIRD = "kb-hostile", "kb-other", "kb-third"
# Only bounds how long a broken build hangs before the test reports it; never met when it passes.
HANG_S = 300


async def eventually(check, what: str) -> None:  # noqa: ANN001
    for _ in range(HANG_S * 20):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def pid_of(pid_file: Path) -> int:
    await eventually(lambda: pid_file.exists() and pid_file.read_text(), "the reader started")
    return int(pid_file.read_text())


async def completed(harness: Harness, kb: str, name: str, data: bytes, query: str, answer: str) -> None:
    result = await harness.ingest(kb, name, data)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    assert answer in (await harness.texts(kb, query))[0]


async def test_a_reader_that_aborts_fails_its_file_and_the_next_upload_is_read(
        harness: Harness, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(isolation, "read_upload", worker_readers.aborts)
    result = await harness.ingest(HOSTILE, "prices.xlsx", b"PK not really a workbook")
    assert result.status == DocumentStatus.FAILED
    assert result.error_message.startswith("The spreadsheet reader crashed while reading this file (it was "
                                           "stopped by signal 6, SIGABRT")
    assert "open it, save it again or split it" in result.error_message
    monkeypatch.undo()
    await completed(harness, HOSTILE, "solar.txt", SOLAR, "solar array kilowatts", "42 kilowatts")


# A reader that hangs, and a chunking that cannot finish (chunking runs in a worker too: before, a
# chunking that took half an hour ran on in a plugin thread, at full CPU, long after its upload had
# failed). The chunking's deadline leaves time to read the file first, also on a busy machine.
@pytest.mark.parametrize(("step", "stand_in", "deadline_s"), [
    ("read_upload", worker_readers.hangs, 8.0),
    ("split_upload", worker_readers.splits_forever, 20.0),
], ids=["reading", "chunking"])
async def test_work_that_cannot_finish_is_killed_at_the_deadline_and_every_lane_is_free_again(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, step: str,
        stand_in: Callable[..., object], deadline_s: float):
    monkeypatch.setattr(component, "INGEST_TIMEOUT_S", deadline_s)
    monkeypatch.setattr(isolation, step, stand_in)
    pid_file = tmp_path / "pid"
    hung = asyncio.ensure_future(harness.ingest(HOSTILE, "hangs.txt", f"{pid_file}\n".encode() + TEA))
    pid = await pid_of(pid_file)
    result = await hung
    assert result.status == DocumentStatus.FAILED
    assert result.error_message.startswith(f"Processing took longer than {deadline_s:.0f} s and was stopped")
    await eventually(lambda: not alive(pid), "the worker was killed")
    # every lane is free again: as many uploads as lanes, at once (with the production deadline:
    # theirs is not what is tested, and a busy machine starting the killed lane's worker is slow)
    monkeypatch.undo()
    lanes = workers.GENERAL_LANES + workers.QUICK_LANES
    results = await asyncio.gather(*(harness.ingest(HOSTILE, f"tea-{i}.txt", TEA + b" %d" % i) for i in range(lanes)))
    assert [r.status for r in results] == [DocumentStatus.COMPLETED] * lanes


async def test_another_kbs_upload_does_not_wait_for_a_reader_that_hangs(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """No deadline here (the production one): the hung upload is still running when the other
    KB's upload completes, however slow the machine, unless that upload waited for it."""
    monkeypatch.setattr(isolation, "read_upload", worker_readers.hangs)
    pid_file = tmp_path / "pid"
    hung = asyncio.ensure_future(harness.ingest(HOSTILE, "hangs.txt", f"{pid_file}\n".encode() + TEA))
    pid = await pid_of(pid_file)
    monkeypatch.setattr(isolation, "read_upload", worker_readers.read_upload)
    try:
        await asyncio.wait_for(completed(harness, OTHER, "solar.txt", SOLAR, "solar array kilowatts", "42 kilowatts"),
                               HANG_S)
        assert not hung.done()
    finally:
        hung.cancel()
        await asyncio.gather(hung, return_exceptions=True)
    await eventually(lambda: not alive(pid), "the hung worker was killed")


async def test_a_cancelled_ingest_hook_kills_its_worker(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(isolation, "read_upload", worker_readers.hangs)
    pid_file = tmp_path / "pid"
    hook = asyncio.ensure_future(harness.ingest(HOSTILE, "hangs.txt", f"{pid_file}\n".encode() + TEA))
    pid = await pid_of(pid_file)
    hook.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hook
    await eventually(lambda: not alive(pid), "the worker of the cancelled hook was killed")


async def test_deleting_the_knowledge_base_kills_the_worker_reading_its_file(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    await harness.create(HOSTILE)
    monkeypatch.setattr(isolation, "read_upload", worker_readers.hangs)
    pid_file = tmp_path / "pid"
    upload = asyncio.ensure_future(harness.ingest(HOSTILE, "hangs.txt", f"{pid_file}\n".encode() + TEA))
    pid = await pid_of(pid_file)
    await harness.component.on_knowledge_base_delete(HOSTILE)
    result = await upload
    assert result.status == DocumentStatus.FAILED
    assert result.error_message.startswith("The knowledge base was deleted while this file was being processed")
    await eventually(lambda: not alive(pid), "the worker reading the deleted KB's file was killed")


async def test_a_worker_never_writes_to_the_plugins_stdout_or_stderr(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]):
    workers.shutdown_workers()  # the next workers start with this test's fds 1 and 2 captured
    monkeypatch.setattr(isolation, "read_upload", worker_readers.prints)
    await completed(harness, HOSTILE, "solar.txt", SOLAR, "solar array kilowatts", "42 kilowatts")
    captured = capfd.readouterr()
    assert "parse worker" not in captured.out + captured.err


async def test_a_worker_does_not_see_the_plugins_secrets(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PLUGIN_DEBUG_KEY", "planted-debug-key-7f3a")
    monkeypatch.setenv("LANGBOT_PLUGIN_REGISTRATION_CAPABILITY", "planted-capability-91c2")
    workers.shutdown_workers()  # the next workers start from this environment
    monkeypatch.setattr(isolation, "read_upload", worker_readers.environment)
    document = await isolation.parse_upload(b"anything", "env.txt", "", HOSTILE)
    assert "PATH=" in document.text
    assert "planted" not in document.text


async def test_a_reader_past_the_memory_cap_fails_its_file_with_the_memory_message(
        harness: Harness, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(isolation, "read_upload", worker_readers.allocates)
    result = await harness.ingest(HOSTILE, "big.json", b'{"a": 1}')
    assert result.status == DocumentStatus.FAILED
    assert result.error_message.startswith(
        f"The JSON reader ran out of memory while reading this file (it may use "
        f"{limits.PARSE_WORKER_MEMORY_MIB:,} MiB)")


async def test_two_heavy_pdfs_in_two_kbs_do_not_stop_a_third_kbs_small_upload(
        harness: Harness, monkeypatch: pytest.MonkeyPatch):
    """r03 of the hostile review: before, the two PDFs held both parse threads past their
    deadline and the third KB's 90-byte upload failed as 'took longer than N s'."""
    monkeypatch.setattr(component, "INGEST_TIMEOUT_S", 30.0)
    monkeypatch.setattr(limits, "PDF_CONTENT_FLOOR_BYTES", 1 << 40)  # a reader that takes long (no limit stops it)
    bomb = shared_content_pdf(40, 100_000)  # ~100 s of PDFium text extraction, 14 KB
    heavy = [asyncio.ensure_future(harness.ingest(kb, "heavy.pdf", bomb)) for kb in (HOSTILE, OTHER)]
    # (a limit on PDF content read before PDFium would fail them at once instead)
    await eventually(lambda: all(upload.done() for upload in heavy)
                     or workers.general_lane_holders() == sorted([HOSTILE, OTHER]),
                     "both heavy PDFs are read in the general lanes")
    await completed(harness, THIRD, "solar.txt", SOLAR, "solar array kilowatts", "42 kilowatts")
    for upload in heavy:  # LangBot gives up on them: their workers are killed, the lanes free
        upload.cancel()
    await asyncio.gather(*heavy, return_exceptions=True)
    assert workers.general_lane_holders() == []


async def test_a_kb_holding_a_lane_lets_another_kb_have_the_next_one(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Big files (past the quick lane's size) of one KB hold both general lanes; when one frees,
    the other KB's waiting file gets it before the first KB's third file."""
    monkeypatch.setattr(isolation, "read_upload", worker_readers.hangs)
    padding = b"x" * (workers.QUICK_MAX_BYTES + 1)

    def upload(kb: str, name: str) -> asyncio.Future:
        return asyncio.ensure_future(harness.ingest(kb, f"{name}.txt", f"{tmp_path / name}\n".encode() + padding))

    first, second = upload(HOSTILE, "a1"), upload(HOSTILE, "a2")
    await pid_of(tmp_path / "a1")
    await pid_of(tmp_path / "a2")
    third = upload(HOSTILE, "a3")
    await eventually(lambda: len(workers._POOL_OWNER.get().waiting) == 1, "the third file waits")
    other = upload(OTHER, "b1")
    await eventually(lambda: len(workers._POOL_OWNER.get().waiting) == 2, "the other KB's file waits")
    first.cancel()
    await pid_of(tmp_path / "b1")
    assert not (tmp_path / "a3").exists()
    assert workers.general_lane_holders() == sorted([HOSTILE, OTHER])
    for upload_task in (second, third, other):
        upload_task.cancel()
    await asyncio.gather(first, second, third, other, return_exceptions=True)
    assert workers.general_lane_holders() == []


async def test_workers_start_when_the_plugins_root_is_not_on_sys_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The runtime has the plugin's root on sys.path only while it imports the components."""
    root = str(Path(__file__).resolve().parent.parent)
    workers.shutdown_workers()
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in (root, "", ".")])
    monkeypatch.chdir(tmp_path)
    document = await isolation.parse_upload(SOLAR, "solar.txt", "", OTHER)
    assert "42 kilowatts" in document.text


async def test_a_worker_is_replaced_after_its_jobs_and_when_it_died_idle(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(isolation, "read_upload", worker_readers.pid)
    # fresh workers: one that ran an earlier test's jobs would reach RECYCLE_JOBS early (and whether
    # its lane counts the second job before or after the limit drops below is a race)
    workers.shutdown_workers()

    async def worker_pid() -> int:
        return int((await isolation.parse_upload(b"x", "pid.txt", "", OTHER)).text)

    first = await worker_pid()
    assert await worker_pid() == first  # reused
    monkeypatch.setattr(workers, "RECYCLE_JOBS", 3)
    assert await worker_pid() == first  # its third job, its last
    recycled = await worker_pid()
    assert recycled != first and not alive(first)
    monkeypatch.undo()
    monkeypatch.setattr(isolation, "read_upload", worker_readers.pid)
    for idle in workers.worker_pids():  # killed while idle (the system's OOM killer, an operator)
        os.kill(idle, signal.SIGKILL)
    assert await worker_pid() not in (first, recycled)


async def test_an_idle_worker_is_stopped(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(workers, "IDLE_STOP_S", 0.5)
    workers.shutdown_workers()  # lanes that wait with this idle time
    await isolation.parse_upload(SOLAR, "solar.txt", "", OTHER)
    await eventually(lambda: workers.worker_pids() == [], "idle workers stopped")
    monkeypatch.undo()
    workers.shutdown_workers()


def test_no_worker_outlives_the_plugin_process(tmp_path: Path):
    script = (
        "import asyncio, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
        "from lucidrag.base import workers\n"
        "from lucidrag.ingestion import isolation\n"
        "asyncio.run(isolation.parse_upload(b'tea', 'tea.txt', '', 'kb'))\n"
        "print(' '.join(map(str, workers.worker_pids())))\n")
    pids = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_S,
                          check=True).stdout.split()
    # the lanes start their workers side by side: on a busy machine not all are up when the job is done
    assert 1 <= len(pids) <= workers.GENERAL_LANES + workers.QUICK_LANES
    for _ in range(HANG_S * 20):
        if not any(alive(int(p)) for p in pids):
            break
        time.sleep(0.05)
    assert not any(alive(int(p)) for p in pids)


_INSTALLED_PLUGIN = """
import asyncio, json, os, sys
root = os.getcwd()
sys.path.insert(0, root)
import components.knowledge_engine.lucid_rag  # as the runtime imports a component: root on sys.path meanwhile
sys.path[:] = [entry for entry in sys.path if entry not in (root, "")]
from lucidrag.base import workers
from lucidrag.ingestion import isolation
document = asyncio.run(isolation.parse_upload(b"The solar array on building C produces 42 kilowatts.", "solar.txt", "", "kb"))
environments = [open(f"/proc/{pid}/environ", "rb").read() for pid in workers.worker_pids()]
with open(sys.argv[1], "w") as out:
    json.dump({"text": document.text, "workers": len(environments), "module": workers.__file__,
               "planted": any(b"planted" in environment for environment in environments)}, out)
"""


def test_workers_start_in_the_installed_package_as_langbot_runs_it(tmp_path: Path):
    """LangBot's runtime (SDK worker_launcher, profile oss_dev) runs an installed .lbpkg in its
    unpacked folder with only its own variables (PYTHONPATH: the dependencies; a one-use
    registration capability) and stdin/stdout as its protocol pipe, and imports the components with
    the plugin's root on sys.path only meanwhile."""
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["bash", "scripts/build.sh"], cwd=root, env=dict(os.environ, LBP=shutil.which("lbp") or ""),
                   check=True, capture_output=True, timeout=HANG_S)
    package = max(root.glob("dist/*.lbpkg"), key=lambda path: path.stat().st_mtime)
    code = tmp_path / "plugin"
    zipfile.ZipFile(package).extractall(code)
    environment = {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONUNBUFFERED": "1", "LANGBOT_PLUGIN_RUNTIME_PROFILE": "oss_dev",
                   "LANGBOT_PLUGIN_REGISTRATION_CAPABILITY": "planted-capability-5e1d"}
    result = tmp_path / "result.json"
    run = subprocess.run([sys.executable, "-c", _INSTALLED_PLUGIN, str(result)], cwd=code, env=environment,
                         stdin=subprocess.PIPE, capture_output=True, timeout=HANG_S)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout == b""  # LangBot's protocol pipe: nothing from the plugin or its workers
    seen = json.loads(result.read_text())
    assert "42 kilowatts" in seen["text"]
    assert Path(seen["module"]).is_relative_to(code)  # the package's code, not this checkout's
    assert seen["workers"] >= 1 and not seen["planted"]


async def test_a_workers_log_records_come_back_to_the_plugins_log(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setattr(isolation, "read_upload", worker_readers.logs)
    with caplog.at_level("WARNING", logger="lucidrag.ingestion.parsing.registry"):
        await isolation.parse_upload(SOLAR, "solar.txt", "", OTHER)
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("lucidrag.ingestion.parsing.registry", "WARNING", "(parse worker) a sheet was skipped by a parse worker")]
