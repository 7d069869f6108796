"""What the console shows of a KB's query log: rows, per-window summaries and exports (pure).

A window (last hour, day or week) summarises the questions asked in it: how many, the
percentiles of the plugin's own latency, how many found nothing, how full the results were
(results / top_k), the slowest and the most frequent questions, the files most often returned
and which known files were never returned.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from lucidrag.state.querylog import QueryEntry

WINDOWS: dict[str, float] = {"hour": 3600.0, "day": 86400.0, "week": 7 * 86400.0}
TOP = 10  # entries of each "most" list
NEVER_LISTED = 100  # files never returned that are named


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def entry_row(entry: QueryEntry) -> dict[str, Any]:
    return {
        "at": entry.at,
        "time": datetime.fromtimestamp(entry.at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "question": entry.question,
        "hash": entry.digest,
        "mode": entry.mode,
        "latency_ms": round(entry.latency_ms, 1),
        "top_k": entry.top_k,
        "results": entry.results,
        "nothing_found": entry.results == 0,
        "error": entry.error,
        "files": [{"file_id": f, "document_name": n, "score": round(s, 4)} for f, n, s in entry.files],
    }


def summary(entries: Sequence[QueryEntry], since: float, known_files: Collection[str],
            names: Mapping[str, str]) -> dict[str, Any]:
    """The questions asked at or after `since` (Unix time). `known_files`: the KB's files now;
    `names`: file id -> name, for those of them the caller could name."""
    asked = [e for e in entries if e.at >= since]
    latencies = [e.latency_ms for e in asked]
    questions: Counter[str] = Counter(e.digest for e in asked)
    example = {e.digest: e.question for e in reversed(asked)}  # the latest wording of each
    returned: Counter[str] = Counter()
    returned_as: dict[str, str] = {}  # the name a file had when it was returned
    for entry in asked:
        for file_id, name, _ in entry.files:
            returned[file_id] += 1
            returned_as.setdefault(file_id, name)
    never = [f for f in known_files if f not in returned]
    never.sort(key=lambda f: (f not in names, (names.get(f) or "").lower(), f))
    slowest = sorted(asked, key=lambda e: e.latency_ms, reverse=True)[:TOP]
    return {
        "questions": len(asked),
        "latency_ms": {name: _round(percentile(latencies, p)) for name, p in (("p50", 50), ("p95", 95), ("p99", 99))},
        "nothing_found": sum(1 for e in asked if e.results == 0),
        "nothing_found_rate": _ratio(sum(1 for e in asked if e.results == 0), len(asked)),
        "errors": sum(1 for e in asked if e.error),
        "top_k_fill": _ratio(sum(min(e.results, e.top_k) / e.top_k for e in asked if e.top_k > 0), len(asked)),
        "slowest": [entry_row(e) for e in slowest],
        "most_frequent": [{"question": example[d], "hash": d, "count": n} for d, n in questions.most_common(TOP)],
        "files_most_returned": [{"file_id": f, "document_name": names.get(f) or returned_as[f], "count": n,
                                 "deleted": f not in known_files} for f, n in returned.most_common(TOP)],
        "files_never_returned": [{"file_id": f, "document_name": names.get(f, "")} for f in never[:NEVER_LISTED]],
        "files_never_returned_count": len(never),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _ratio(part: float, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 4)


CSV_COLUMNS = ("time", "question", "hash", "mode", "latency_ms", "top_k", "results", "nothing_found",
               "error", "top_files")


def to_csv(entries: Sequence[QueryEntry]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for entry in entries:
        row = entry_row(entry)
        files = "; ".join(f"{f['document_name']} ({f['score']:.3f})" for f in row["files"])
        writer.writerow([row["time"], row["question"], row["hash"], row["mode"], row["latency_ms"], row["top_k"],
                         row["results"], "yes" if row["nothing_found"] else "no", row["error"], files])
    return out.getvalue()


def to_json(entries: Sequence[QueryEntry]) -> str:
    return json.dumps([entry_row(e) for e in entries], ensure_ascii=False, indent=1)
