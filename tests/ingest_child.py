"""One real ingest (tests/conftest.py's Harness, the fake host) in a process of its own, for tests and
benchmarks that measure its memory or must survive its crash:

    python -m tests.ingest_child FILE NAME [--as-mb MB]

prints one JSON line: the ingest's status and error message, idle_mb (RSS of this process and its
parse workers once every reader is imported here, the knowledge base exists and the workers have
started), grew_mb (what this process and its workers grew by together over idle: each one's peak
RSS over its own) and seconds. This process's address space is capped at --as-mb (RLIMIT_AS; the
workers have their own cap, limits.PARSE_WORKER_MEMORY_MIB) so that a runaway reader fails instead
of taking the machine.

    run_ingest(data, name) -> dict   (from a test: writes the file, runs the child, reads the line;
                                      a child killed by a signal gives status "died")
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AS_MB = 4096


def run_ingest(data: bytes, name: str, *, as_mb: int = AS_MB, timeout: float = 600, warm_ocr: bool = False) -> dict:
    """`warm_ocr`: idle counts the OCR models loaded (a worker loads them once, for its life)."""
    with tempfile.TemporaryDirectory(prefix="lucidrag-hostile-") as folder:
        path = Path(folder) / "upload.bin"
        path.write_bytes(data)
        done = subprocess.run([sys.executable, "-m", "tests.ingest_child", str(path), name, "--as-mb", str(as_mb)]
                              + (["--warm-ocr"] if warm_ocr else []),
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"status": "died", "returncode": done.returncode, "stderr": done.stderr[-2000:]}
    return json.loads(lines[-1])


def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak RSS (VmHWM; ru_maxrss would start from the RSS of the process that forked
    it, carried over exec); 0 once it has ended."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return 0.0


def peaks_mb() -> dict[str, float]:
    """Peak RSS of this process, of each running parse worker, and of the largest worker that ended
    (RUSAGE_CHILDREN: it counts from this process's RSS when it was started, so it over-counts)."""
    from lucidrag.base import workers

    peaks = {"self": peak_rss_mb()}
    peaks.update({str(pid): peak_rss_mb(pid) for pid in workers.worker_pids()})
    peaks["ended"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return peaks


def growth_mb(idle: dict[str, float], after: dict[str, float]) -> float:
    """What the plugin process and its workers grew by together: each process's peak over its
    idle; a worker started since idle counts whole."""
    return sum(max(0.0, peak - idle.get(key, 0.0)) for key, peak in after.items())


def _settled(loop) -> dict[str, float]:  # noqa: ANN001
    """The peaks once the workers have started and stopped growing (their preload done)."""
    from lucidrag.base import workers

    last: dict[str, float] = {}
    for _ in range(200):
        loop.run_until_complete(asyncio.sleep(0.1))
        now = peaks_mb()
        if len(workers.worker_pids()) == workers.GENERAL_LANES + workers.QUICK_LANES and now == last:
            return now
        last = now
    return last


def readers() -> None:
    """Import every reader a parse may load, so that idle includes them (they load once per process)."""
    import bs4  # noqa: F401
    import chardet  # noqa: F401
    import docx  # noqa: F401
    import markdown_it  # noqa: F401
    import markdownify  # noqa: F401
    import PIL.Image  # noqa: F401
    import pptx  # noqa: F401
    import pypdf  # noqa: F401
    import pypdfium2  # noqa: F401
    import python_calamine  # noqa: F401


def picture_of_text() -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (1200, 400), "white")
    ImageDraw.Draw(image).text((40, 150), "The parse workers read pictures", fill="black", font_size=48)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("name")
    parser.add_argument("--as-mb", type=int, default=AS_MB)
    parser.add_argument("--warm-ocr", action="store_true")
    args = parser.parse_args()
    data = Path(args.file).read_bytes()

    sys.path.insert(0, str(ROOT))
    import lucidrag.base.host
    import lucidrag.engine
    from tests.conftest import FakePlugin, Harness, runtime_loop

    lucidrag.base.host.RETRY_DELAYS = (0.0, 0.0, 0.0)  # as the autouse fixtures of conftest.py
    lucidrag.engine.PREVIOUS_PROCESS_LANDING_S = 0.0
    readers()
    harness = Harness(FakePlugin())
    loop = runtime_loop()
    loop.run_until_complete(harness.create("kb-hostile"))
    loop.run_until_complete(harness.ingest("kb-warm", "warm.txt", b"The parse workers are started."))
    if args.warm_ocr:  # both general lanes read a picture: their OCR models are loaded, as in use
        async def warm() -> None:
            await asyncio.gather(*(harness.ingest(f"kb-warm-{n}", "warm.png", picture_of_text()) for n in range(2)))
        loop.run_until_complete(warm())
    idle = _settled(loop)
    limit = args.as_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    start = time.perf_counter()
    result = loop.run_until_complete(harness.ingest("kb-hostile", args.name, data))
    seconds = time.perf_counter() - start
    print(json.dumps({"status": result.status.value, "error": result.error_message or "",
                      "idle_mb": round(sum(idle.values()) - idle["ended"]), "grew_mb": round(growth_mb(idle, peaks_mb())),
                      "seconds": round(seconds, 2), "vectors": harness.host.vector_count("kb-hostile")}))


if __name__ == "__main__":
    main()
