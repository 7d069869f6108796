#!/usr/bin/env python3
"""What the parse workers cost (base/workers.py, ingestion/isolation.py). Not a test: numbers for
docs/BENCHMARKS.md ("Parse workers").

    nice -n 10 .venv/bin/python bench/bench_workers.py [--repeat 5]

- worker start (a fresh interpreter importing the readers), idle RSS and address space; a worker's
  RSS and address space after OCR (the models load once per worker)
- per file, the boundary's cost: the same bytes parsed in this process (`parse_file`, as the parse
  threads did) and through a worker (`parse_upload`), interleaved, median of --repeat; bytes moved
  (pickled request and answer); the same for chunking (`chunk_document` / `chunk_upload`)
- whole ingests through tests/conftest.py's Harness, the chunks compared: in worker processes vs.
  parsed in a thread of this process (the seam tests/sim uses, i.e. the old path)
- a worker killed (cancelled job) until its pid is gone, and a reader that aborts until the next
  file is read
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lucidrag.base import limits, workers  # noqa: E402
from lucidrag.base.settings import parse_creation_settings  # noqa: E402
from lucidrag.ingestion.chunking import chunk_document  # noqa: E402
from lucidrag.ingestion import isolation  # noqa: E402
from lucidrag.ingestion.parsing import parse_file  # noqa: E402
from tests import ocr_samples, samples, worker_readers  # noqa: E402
from tests.conftest import FakePlugin, Harness, runtime_loop  # noqa: E402
from tests.test_engine import long_text  # noqa: E402


def status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmPeak", "VmSize", "VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024
    return out


def files() -> dict[str, bytes]:
    scan = ocr_samples.scanned_pdf([ocr_samples.render(["Service agreement for the cooling pumps.",
                                                        "The supplier shall repair any pump within 36 months."],
                                                       dpi=200, height_in=11.69)] * 2, dpi=200)
    return {"note.txt (45 B)": b"The gate code for loading bay 7 is 4417.",
            "parts.txt (200 chunks)": long_text(200),
            "report.docx": samples.docx_bytes(),
            "prices.xlsx": samples.xlsx_bytes(),
            "guide.pdf (3 pages)": samples.pdf_bytes([["Install", "Run the installer as an administrator."]] * 3),
            "scan.pdf (2 pages, OCR)": scan}


def name_of(label: str) -> str:
    return label.split(" ")[0]


async def boundary(repeat: int) -> None:
    print("| file | bytes | in this process | in a worker | boundary | moved (request + answer) |")
    print("|---|---|---|---|---|---|")
    for label, data in files().items():
        name = name_of(label)
        inline, worker = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            document = parse_file(data, name)
            inline.append(time.perf_counter() - start)
            start = time.perf_counter()
            remote = await isolation.parse_upload(data, name, "", "bench")
            worker.append(time.perf_counter() - start)
            assert remote == document
        request = len(pickle.dumps((isolation.read_upload, (data, name, "", isolation.limits_in_force())), 5))
        answer = len(pickle.dumps(("ok", document, [], 0), 5))
        a, b = statistics.median(inline) * 1000, statistics.median(worker) * 1000
        print(f"| {label} | {len(data):,} | {a:.1f} ms | {b:.1f} ms | {b - a:+.1f} ms | "
              f"{request:,} + {answer:,} B |")


async def chunk_boundary(repeat: int) -> None:
    """Chunking: `chunk_document` in this process vs. `chunk_upload` through a worker."""
    settings = parse_creation_settings({"embedding_model_uuid": "m"})
    print("\n| chunked file | chunks | in this process | in a worker | boundary | moved (request + answer) |")
    print("|---|---|---|---|---|---|")
    uploads = {label: data for label, data in files().items() if "OCR" not in label}
    uploads["parts.txt (4 MB)"] = long_text(10_000)
    for label, data in uploads.items():
        document = parse_file(data, name_of(label))
        inline, worker = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            chunked = chunk_document(document, settings)
            inline.append(time.perf_counter() - start)
            start = time.perf_counter()
            remote = await isolation.chunk_upload(document, settings, "bench")
            worker.append(time.perf_counter() - start)
            assert remote == chunked
        request = len(pickle.dumps((isolation.split_upload, (document, settings, isolation.limits_in_force())), 5))
        answer = len(pickle.dumps(("ok", chunked, [], 0), 5))
        a, b = statistics.median(inline) * 1000, statistics.median(worker) * 1000
        print(f"| {label} | {len(chunked.chunks):,} | {a:.1f} ms | {b:.1f} ms | {b - a:+.1f} ms | "
              f"{request:,} + {answer:,} B |")


async def ingests(repeat: int) -> None:
    """Whole ingests: through the workers, and parsed in a thread (the old path, via the seam)."""
    original = workers.run_job

    async def in_thread(job: workers.WorkerJob):  # noqa: ANN202
        return await asyncio.to_thread(job.fn, *job.args)

    times: dict[str, dict[str, list[float]]] = {}
    chunks: dict[str, dict[str, int]] = {}
    for round_ in range(repeat):
        for way, runner in (("worker", original), ("thread", in_thread)):
            workers.run_job = runner
            harness = Harness(FakePlugin())
            for label, data in files().items():
                start = time.perf_counter()
                result = await harness.ingest(f"kb-{round_}", name_of(label), data)
                times.setdefault(label, {}).setdefault(way, []).append(time.perf_counter() - start)
                chunks.setdefault(label, {})[way] = result.chunks_created
    workers.run_job = original
    print("\n| upload (whole ingest, fake host) | parsed in a thread (before) | in a worker (now) | chunks |")
    print("|---|---|---|---|")
    for label, ways in times.items():
        a, b = (statistics.median(ways[w]) * 1000 for w in ("thread", "worker"))
        same = "same" if chunks[label]["thread"] == chunks[label]["worker"] else "DIFFERENT"
        print(f"| {label} | {a:.0f} ms | {b:.0f} ms ({(b - a) / a:+.0%}) | {chunks[label]['worker']} ({same}) |")


async def kills() -> None:
    # a cancelled job: until its worker is gone
    isolation.read_upload = worker_readers.hangs  # type: ignore[assignment]
    pid_file = Path(f"/tmp/lucidrag-bench-pid-{os.getpid()}")
    pid_file.unlink(missing_ok=True)
    job = asyncio.ensure_future(isolation.parse_upload(f"{pid_file}\n".encode(), "x.txt", "", "bench"))
    while not (pid_file.exists() and pid_file.read_text()):
        await asyncio.sleep(0.01)
    pid = int(pid_file.read_text())
    start = time.perf_counter()
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)
    while os.path.exists(f"/proc/{pid}"):
        await asyncio.sleep(0.001)
    killed = time.perf_counter() - start
    pid_file.unlink(missing_ok=True)
    # a reader that aborts, then the next file
    isolation.read_upload = worker_readers.aborts  # type: ignore[assignment]
    start = time.perf_counter()
    try:
        await isolation.parse_upload(b"x", "x.xlsx", "", "bench")
    except Exception as error:  # noqa: BLE001
        crashed = f"{type(error).__name__}"
    failed = time.perf_counter() - start
    isolation.read_upload = worker_readers.read_upload  # type: ignore[assignment]
    start = time.perf_counter()
    await isolation.parse_upload(b"The next file.", "next.txt", "", "bench")
    print(f"\ncancelled job -> its worker gone: {killed * 1000:.0f} ms; a reader that aborts -> {crashed} in "
          f"{failed * 1000:.0f} ms, the next file read {((time.perf_counter() - start) * 1000):.0f} ms later")


async def starts() -> None:
    workers.shutdown_workers()
    start = time.perf_counter()
    await isolation.parse_upload(b"x", "x.txt", "", "bench")
    first = time.perf_counter() - start
    await asyncio.sleep(1.0)  # every lane's worker started
    pids = workers.worker_pids()
    idle = [status(pid) for pid in pids]
    pool = workers._POOL_OWNER.get()
    start_s = [lane.worker.start_s for lane in pool.lanes if lane.worker is not None]
    print(f"workers: {len(pids)} (general {workers.GENERAL_LANES} + quick {workers.QUICK_LANES}); first file on a "
          f"cold pool {first * 1000:.0f} ms; a worker's imports {statistics.median(start_s) * 1000:.0f} ms; idle RSS "
          f"{statistics.median(s['VmRSS'] for s in idle)} MiB, address space {statistics.median(s['VmSize'] for s in idle)} "
          f"MiB each (cap {limits.PARSE_WORKER_MEMORY_MIB} MiB)")


async def after_ocr() -> None:
    scan = files()["scan.pdf (2 pages, OCR)"]
    workers.shutdown_workers()
    start = time.perf_counter()
    await isolation.parse_upload(scan, "scan.pdf", "", "bench")
    first = time.perf_counter() - start
    start = time.perf_counter()
    await isolation.parse_upload(scan, "scan.pdf", "", "bench")
    second = time.perf_counter() - start
    s = max((status(pid) for pid in workers.worker_pids()), key=lambda st: st["VmRSS"])  # the one that read it
    print(f"2-page scan: first in a fresh worker {first:.1f} s (OCR models loaded), next {second:.1f} s; that worker "
          f"RSS {s['VmRSS']} MiB (peak {s['VmHWM']}), address space {s['VmSize']} MiB (peak {s['VmPeak']})")


async def main(repeat: int) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    await starts()
    await after_ocr()
    print()
    await boundary(repeat)
    await chunk_boundary(repeat)
    await ingests(repeat)
    await kills()
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    import logging

    logging.disable(logging.ERROR)
    loop = runtime_loop()
    try:
        loop.run_until_complete(main(parser.parse_args().repeat))
    finally:
        loop.close()
