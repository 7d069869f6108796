#!/usr/bin/env python3
"""What the lifecycle table (lucidrag/state/lifecycle.FileTable) costs per file of a large KB.

    python bench/bench_file_table.py                 # 100,000 files
    python bench/bench_file_table.py --files 1000000

Measured with tracemalloc, the file ids made beforehand (the keyword index and the records hold
them anyway): the bytes the table allocates per COMMITTED file whose record is stored, reached the
two ways a KB gets there (a restart's storage listing, and commits in this process, which also
wrote its complete vectors), and per file
in a state of its own. A set of the same ids is printed for reference (a per-file set is the
cheapest other way to keep one fact per file). Then the time a load's listing of them takes.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lucidrag.state.lifecycle import FileState, FileTable  # noqa: E402


def allocated(build: Callable[[], object]) -> int:
    """Bytes still allocated by what `build` returns."""
    tracemalloc.start()
    try:
        kept = build()
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del kept
    return current


def listed(ids: list[str]) -> FileTable:
    table = FileTable()
    table.listed(ids)
    return table


def committed(ids: list[str]) -> FileTable:
    table = FileTable()
    table.listed([])
    for file_id in ids:
        table.move(file_id, FileState.INGESTING)
        table.committed(file_id)
        table.record_saved(file_id)
        table.vectors_complete(file_id)
    return table


def to_index(ids: list[str]) -> FileTable:
    table = FileTable()
    for file_id in ids:
        table.to_index(file_id)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000)
    n = parser.parse_args().files
    ids = [str(uuid.UUID(int=i + 1)) for i in range(n)]
    print(f"{n:,} files; bytes per file the structure allocates (tracemalloc)")
    for name, build in [("COMMITTED, from a storage listing", lambda: listed(ids)),
                        ("COMMITTED, by commits in this process", lambda: committed(ids)),
                        ("TO_INDEX (a state with its own view)", lambda: to_index(ids)),
                        ("reference: a set of the same ids", lambda: set(ids))]:
        print(f"  {name:40} {allocated(build) / n:6.1f}")
    start = time.perf_counter()
    listed(ids)
    print(f"a storage listing of them taken in: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
