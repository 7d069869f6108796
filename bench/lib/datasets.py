"""Loaders for the small retrieval test collections under bench/data/.

Standard library only (no numpy, no embedders), so the main CI venv can import it.

    from bench.lib.datasets import load_dataset, available_datasets
    ds = load_dataset("scifact")
    ds.corpus["18670"]   -> ("The DNA Methylome of ...", "DNA methylation plays ...")
    ds.queries["1"]      -> "0-dimensional biomaterials show inductive properties."
    ds.qrels["1"]        -> {"31715818": 1}

Where the files are looked for, first hit wins (each set is a folder <name>/ holding
corpus.jsonl.gz, queries.jsonl.gz, qrels.tsv.gz):
  1. $LUCIDRAG_BENCH_DATA/<name>/
  2. bench/data/<name>/                      (in this repo)
  3. <repo>/../shared/bench/data/<name>/     (the project's shared/ folder beside the clone)
  4. /work/shared/bench/data/<name>/
  5. ~/.cache/lucidrag-bench/data/<name>/    (a machine-local copy)
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

_BENCH = Path(__file__).resolve().parent.parent
_REPO = _BENCH.parent


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    language: str  # "en" | "zh-Hant" | ...
    description: str
    n_docs: int
    n_queries: int
    n_qrels: int  # number of (query, doc) judgments
    file_ext: str = ".txt"  # how the benchmark uploads a document (".md": its sections as headings)


# Sizes are checked by tests/test_bench_data.py; keep them in sync with SOURCE.md.
DATASETS: dict[str, DatasetInfo] = {
    "scifact": DatasetInfo(
        name="scifact",
        language="en",
        description="BEIR SciFact test split (claims -> PubMed abstracts), corpus subsampled to 3,000 docs",
        n_docs=3000,
        n_queries=300,
        n_qrels=339,
    ),
    "drcd": DatasetInfo(
        name="drcd",
        language="zh-Hant",
        description="DRCD (Traditional Chinese Wikipedia MRC) as ReQA-style question -> sentence retrieval",
        n_docs=5017,
        n_queries=300,
        n_qrels=300,
    ),
    "cisi": DatasetInfo(
        name="cisi",
        language="en",
        description="CISI (library and information science abstracts, ~830 characters each), whole collection",
        n_docs=1460,
        n_queries=76,
        n_qrels=3114,
    ),
    "cmrc": DatasetInfo(
        name="cmrc",
        language="zh-Hans",
        description="CMRC 2018 dev (Simplified Chinese Wikipedia MRC) as question -> sentence retrieval",
        n_docs=2008,
        n_queries=300,
        n_qrels=300,
    ),
    "medquad": DatasetInfo(
        name="medquad",
        language="en",
        description="MedQuAD health FAQ entries judged for the TREC 2017 LiveQA medical questions (consumer question -> FAQ entry, graded)",
        n_docs=1935,
        n_queries=96,
        n_qrels=945,
    ),
    "medquad-pages": DatasetInfo(
        name="medquad-pages",
        language="en",
        description="whole MedQuAD health-topic pages (one Markdown section per question), LiveQA medical questions, graded at page level",
        n_docs=300,
        n_queries=60,
        n_qrels=110,
        file_ext=".md",
    ),
}


@dataclass
class Dataset:
    name: str
    language: str
    corpus: dict[str, tuple[str, str]]  # doc_id -> (title, text)
    queries: dict[str, str]  # qid -> text
    qrels: dict[str, dict[str, int]]  # qid -> {doc_id: relevance}
    path: Path | None = field(default=None, compare=False)

    def doc_text(self, doc_id: str, sep: str = "\n") -> str:
        """Title and text joined, the way a document would be ingested."""
        title, text = self.corpus[doc_id]
        return f"{title}{sep}{text}" if title else text


def _candidate_dirs(name: str) -> list[Path]:
    dirs = []
    env = os.environ.get("LUCIDRAG_BENCH_DATA")
    if env:
        dirs.append(Path(env) / name)
    dirs.append(_BENCH / "data" / name)
    dirs.append(_REPO.parent / "shared" / "bench" / "data" / name)
    dirs.append(Path("/work/shared/bench/data") / name)
    dirs.append(Path.home() / ".cache" / "lucidrag-bench" / "data" / name)
    return dirs


def _files_present(d: Path) -> bool:
    return all((d / f).is_file() for f in ("corpus.jsonl.gz", "queries.jsonl.gz", "qrels.tsv.gz"))


def dataset_dir(name: str) -> Path | None:
    """The folder the set would be loaded from, or None if its files are nowhere."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    for d in _candidate_dirs(name):
        if _files_present(d):
            return d
    return None


def available_datasets() -> list[str]:
    """Names of the known sets whose files are present on this machine."""
    return [n for n in DATASETS if dataset_dir(n) is not None]


def _read_jsonl_gz(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load_dataset(name: str) -> Dataset:
    d = dataset_dir(name)
    if d is None:
        tried = ", ".join(str(p) for p in _candidate_dirs(name))
        raise FileNotFoundError(f"dataset {name!r} not found (looked in: {tried}); see bench/data/{name}/SOURCE.md")
    corpus = {str(r["_id"]): (r.get("title") or "", r["text"]) for r in _read_jsonl_gz(d / "corpus.jsonl.gz")}
    queries = {str(r["_id"]): r["text"] for r in _read_jsonl_gz(d / "queries.jsonl.gz")}
    qrels: dict[str, dict[str, int]] = {}
    with gzip.open(d / "qrels.tsv.gz", "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and parts[0] == "query-id":
                continue
            if len(parts) != 3:
                continue
            qid, did, score = parts
            qrels.setdefault(qid, {})[did] = int(score)
    return Dataset(name=name, language=DATASETS[name].language, corpus=corpus, queries=queries, qrels=qrels, path=d)
