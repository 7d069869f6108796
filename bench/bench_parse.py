"""Benchmark lucidrag.ingestion.parsing on a ~5 MB text PDF and a 150,000-row xlsx.

    .venv/bin/python bench/bench_parse.py [--cache DIR] [--rows N] [--pdf-mb MB]

Samples are generated once (reportlab / openpyxl write_only) and cached in a temp directory.
Each parse runs in a fresh subprocess so that peak RSS (ru_maxrss) and the tracemalloc peak
(Python allocations only; pdfium/calamine native memory is not traced) belong to that parse.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))


def _child(path: str) -> None:
    import tracemalloc

    # Import the parsers' heavy dependencies first so they are not counted as the parse's cost.
    import pypdfium2  # noqa: F401
    import python_calamine  # noqa: F401

    from lucidrag.ingestion.parsing import parse_file

    with open(path, "rb") as handle:
        data = handle.read()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    start = time.perf_counter()
    document = parse_file(data, "v1/bench/" + os.path.basename(path))
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # A second, untraced run gives the real speed (tracemalloc slows allocation-heavy code).
    start = time.perf_counter()
    parse_file(data, "v1/bench/" + os.path.basename(path))
    untraced = time.perf_counter() - start
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "seconds": untraced, "seconds_traced": elapsed, "tracemalloc_peak": peak,
        "rss_before_kb": rss_before, "rss_peak_kb": rss_after,
        "sections": len(document.sections), "chars": sum(len(s.text) for s in document.sections),
        "format": document.format,
    }))


def _ensure_samples(cache: str, rows: int, pdf_mb: float) -> list[str]:
    import samples

    os.makedirs(cache, exist_ok=True)
    pdf = os.path.join(cache, f"bench_{pdf_mb:g}mb.pdf")
    xlsx = os.path.join(cache, f"bench_{rows}rows.xlsx")
    if not os.path.exists(pdf):
        t = time.perf_counter()
        pages = samples.big_pdf(pdf + ".tmp", int(pdf_mb * 1024 * 1024))
        os.replace(pdf + ".tmp", pdf)
        print(f"generated {pdf} ({pages} pages) in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    if not os.path.exists(xlsx):
        t = time.perf_counter()
        samples.big_xlsx(xlsx + ".tmp", rows)
        os.replace(xlsx + ".tmp", xlsx)
        print(f"generated {xlsx} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    return [pdf, xlsx]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "lucidrag-bench-parse"))
    parser.add_argument("--rows", type=int, default=150_000)
    parser.add_argument("--pdf-mb", type=float, default=5.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return

    paths = _ensure_samples(args.cache, args.rows, args.pdf_mb)
    print(f"{'file':<24}{'size MB':>9}{'sections':>10}{'chars':>12}{'parse s':>9}"
          f"{'traced s':>10}{'py peak MB':>12}{'RSS +MB':>9}{'RSS peak MB':>13}")
    for path in paths:
        out = subprocess.run([sys.executable, __file__, "--child", path], capture_output=True, text=True,
                             check=True, cwd=ROOT)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        mb = 1024 * 1024
        print(f"{os.path.basename(path):<24}{os.path.getsize(path) / mb:>9.1f}{r['sections']:>10}"
              f"{r['chars']:>12,}{r['seconds']:>9.2f}{r['seconds_traced']:>10.2f}"
              f"{r['tracemalloc_peak'] / mb:>12.1f}{(r['rss_peak_kb'] - r['rss_before_kb']) / 1024:>9.1f}"
              f"{r['rss_peak_kb'] / 1024:>13.1f}")


if __name__ == "__main__":
    main()
