"""What the console shows of a KB's query log: rows, per-window summaries and exports (pure).

A window (last hour, day or week) summarises the questions asked in it: how many, the
percentiles of the plugin's own latency, how many found nothing, how full the results were
(results / top_k), the slowest and the most frequent questions, the files most often returned
and which known files were never returned, and what the knowledge base could not answer.

"Nothing found" is a question that was answered (no error) and gave the bot no passage: an entry's
`results` counts the passages given to the bot, after the relevance cut and the score threshold.
A question that failed counts as failed, not as a gap in the knowledge base.
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
UNANSWERED_LISTED = 50  # questions the knowledge base could not answer that are listed per window


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def nothing_found(entry: QueryEntry) -> bool:
    """The question was answered and the bot was given no passage."""
    return entry.results == 0 and not entry.error


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def unanswered(entries: Sequence[QueryEntry]) -> list[dict[str, Any]]:
    """The distinct questions (same normalised text, or digest) that found nothing, each with how
    often and when last it was asked: most frequent first, then most recently asked. A question
    that found something another time is still listed (it was not answered every time)."""
    count: Counter[str] = Counter()
    latest: dict[str, QueryEntry] = {}
    for entry in entries:
        if nothing_found(entry):
            count[entry.digest] += 1
            if entry.digest not in latest or entry.at >= latest[entry.digest].at:
                latest[entry.digest] = entry
    ordered = sorted(count, key=lambda d: (-count[d], -latest[d].at))
    return [{"question": latest[d].question, "hash": d, "count": count[d], "last_at": latest[d].at,
             "last_time": _time(latest[d].at), "mode": latest[d].mode} for d in ordered]


def entry_row(entry: QueryEntry) -> dict[str, Any]:
    return {
        "at": entry.at,
        "time": _time(entry.at),
        "question": entry.question,
        "hash": entry.digest,
        "mode": entry.mode,
        "latency_ms": round(entry.latency_ms, 1),
        "top_k": entry.top_k,
        "results": entry.results,
        "nothing_found": nothing_found(entry),
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
    gaps = unanswered(asked)
    found_nothing = sum(1 for e in asked if nothing_found(e))
    return {
        "questions": len(asked),
        "latency_ms": {name: _round(percentile(latencies, p)) for name, p in (("p50", 50), ("p95", 95), ("p99", 99))},
        "nothing_found": found_nothing,
        "nothing_found_rate": _ratio(found_nothing, len(asked)),
        "errors": sum(1 for e in asked if e.error),
        "top_k_fill": _ratio(sum(min(e.results, e.top_k) / e.top_k for e in asked if e.top_k > 0), len(asked)),
        "slowest": [entry_row(e) for e in slowest],
        "most_frequent": [{"question": example[d], "hash": d, "count": n} for d, n in questions.most_common(TOP)],
        "files_most_returned": [{"file_id": f, "document_name": names.get(f) or returned_as[f], "count": n,
                                 "deleted": f not in known_files} for f, n in returned.most_common(TOP)],
        "files_never_returned": [{"file_id": f, "document_name": names.get(f, "")} for f in never[:NEVER_LISTED]],
        "files_never_returned_count": len(never),
        "could_not_answer": gaps[:UNANSWERED_LISTED],
        "could_not_answer_count": len(gaps),  # distinct questions
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


UNANSWERED_COLUMNS = ("question", "hash", "times_asked", "last_asked", "mode")


def unanswered_csv(gaps: Sequence[Mapping[str, Any]]) -> str:
    """`unanswered`'s rows as CSV."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(UNANSWERED_COLUMNS)
    for gap in gaps:
        writer.writerow([gap["question"], gap["hash"], gap["count"], gap["last_time"], gap["mode"]])
    return out.getvalue()


def unanswered_json(gaps: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(gaps), ensure_ascii=False, indent=1)
