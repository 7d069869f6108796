"""One real ingest (tests/conftest.py's Harness, the fake host) in a process of its own, for tests and
benchmarks that measure its memory or must survive its crash:

    python -m tests.ingest_child FILE NAME [--as-mb MB]

prints one JSON line: the ingest's status and error message, idle_mb (peak RSS once every reader is
imported and the knowledge base exists), grew_mb (peak RSS over idle, this process and any worker
process it waited for) and seconds. The address space is capped at --as-mb (RLIMIT_AS) so that a
runaway reader fails with MemoryError instead of taking the machine.

    run_ingest(data, name) -> dict   (from a test: writes the file, runs the child, reads the line;
                                      a child killed by a signal gives status "died")
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AS_MB = 4096


def run_ingest(data: bytes, name: str, *, as_mb: int = AS_MB, timeout: float = 600) -> dict:
    with tempfile.TemporaryDirectory(prefix="lucidrag-hostile-") as folder:
        path = Path(folder) / "upload.bin"
        path.write_bytes(data)
        done = subprocess.run([sys.executable, "-m", "tests.ingest_child", str(path), name, "--as-mb", str(as_mb)],
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"status": "died", "returncode": done.returncode, "stderr": done.stderr[-2000:]}
    return json.loads(lines[-1])


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: ru_maxrss would start from the RSS of the process that forked
    it, carried over exec), or that of a worker process it waited for, if larger."""
    with open("/proc/self/status") as status:
        own = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, workers) / 1024


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("name")
    parser.add_argument("--as-mb", type=int, default=AS_MB)
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
    idle = peak_rss_mb()
    limit = args.as_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    start = time.perf_counter()
    result = loop.run_until_complete(harness.ingest("kb-hostile", args.name, data))
    seconds = time.perf_counter() - start
    print(json.dumps({"status": result.status.value, "error": result.error_message or "",
                      "idle_mb": round(idle), "grew_mb": round(peak_rss_mb() - idle), "seconds": round(seconds, 2),
                      "vectors": harness.host.vector_count("kb-hostile")}))


if __name__ == "__main__":
    main()
