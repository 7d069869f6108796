#!/usr/bin/env python3
"""Keyword-index candidates for issue 12, measured on the same tokens: ours, bm25s, tantivy, numpy CSR.

    python3 -m venv /work/wt/.venv-scale
    /work/wt/.venv-scale/bin/pip install -r requirements.txt bm25s tantivy numpy psutil
    /work/wt/.venv-scale/bin/python scripts/bench_index_candidates.py --chunks 10000,100000
    /work/wt/.venv-scale/bin/python scripts/bench_index_candidates.py --chunks 1000000 --candidates lucidrag,tantivy,csr
    /work/wt/.venv-scale/bin/python scripts/bench_index_candidates.py --chunks 100000,1000000 --candidates lucidrag,segindex
    /work/wt/.venv-scale/bin/python scripts/bench_index_candidates.py --records 10000,100000

Corpus: scripts/scale_corpus.py (deterministic; files of 20 chunks of 200-400 characters: English
technical prose with part codes, Chinese paragraphs, mixed), tokenised ONCE with
`lucidrag.keyword.tokenize_chunks` and cached (~/.cache/lucidrag-scale), so every candidate
indexes the very same terms; queries are tokenised with `tokenize(q, query=True)` for all.

Candidates:
  lucidrag  lucidrag.keyword.BM25Index (add_tokenized per file; to_bytes/from_bytes snapshot)
  bm25s     bm25s.BM25 (method lucene, k1 1.2, b 0.75) over our term ids (needs the whole corpus
            at once; no add/delete: both are a full rebuild)
  tantivy   tantivy-py, body field pre-tokenised (our terms joined by spaces, "whitespace"
            tokenizer, freqs without positions), delete by term on a raw `file` field, 1 thread
  csr       scripts/csr_index.py: numpy arrays (64-bit term hashes, packed uint32 postings,
            log-structured segments, alive flags, exact live df)
  segindex  lucidrag/segindex.py, the product version of csr: scores like lucidrag (heading
            field, query shares, MaxScore), tombstones, merge policy, manifest + segment blobs
            applied to the snapshot directory after every add/delete as plugin storage would

Each (candidate, size) is measured in fresh subprocesses: "build" (build, queries, save, delete
one file, add one file) and "load" (the restart: read the snapshot's parts and open it). RSS
deltas come from psutil in those processes; tracemalloc (Python allocations, numpy included,
Rust not) from a third, traced load at <= 100k chunks. Tokenising is shared by all candidates
and reported once (the corpus cache records its time). overlap@10 = |top10 ∩ ours' top10| / 10
averaged over queries where ours returns 10 results.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import scale_corpus as sc  # noqa: E402
from lucidrag.keyword import BM25Index, tokenize, tokenize_chunks  # noqa: E402

DEFAULT_CACHE = Path.home() / ".cache" / "lucidrag-scale"
PART_BYTES = 4 << 20  # plugin storage values of a few MB


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def mib(n: float) -> float:
    return n / 2**20


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(math.ceil(p * len(s))) - 1)]


def query_terms(q: str) -> list[str]:
    return list(dict.fromkeys(tokenize(q, query=True)))


def dir_files(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_size for p in path.rglob("*") if p.is_file()}


def split_parts(files: dict[str, bytes]) -> int:
    return sum(max(1, math.ceil(len(v) / PART_BYTES)) for v in files.values())


# ============================================================================ candidates
class Lucidrag:
    name = "lucidrag"

    def __init__(self) -> None:
        self.idx = BM25Index()

    def build(self, corpus: sc.TokenizedCorpus) -> float:
        spent = 0.0
        for f in range(corpus.n_files):
            chunks = corpus.file_chunks(f)
            t0 = time.perf_counter()
            self.idx.add_tokenized(sc.file_id(f), chunks)
            spent += time.perf_counter() - t0
        return spent

    def search(self, q: str) -> list[str]:
        return [c for c, _ in self.idx.search(q, 10)]

    def n(self) -> int:
        return len(self.idx)

    def df(self, term: str) -> int:
        p = self.idx._postings.get(term)
        return 0 if p is None else 1 if isinstance(p, int) else len(p)

    def delete(self, f: int, chunks: list) -> None:
        self.idx.remove(sc.file_id(f))

    def add(self, f: int, chunks: list) -> None:
        self.idx.add_tokenized(sc.file_id(f), chunks)

    def save(self, d: Path) -> dict[str, int]:
        d.mkdir(parents=True, exist_ok=True)
        (d / "index.bin").write_bytes(self.idx.to_bytes())
        return dir_files(d)

    def persist_after_change(self, d: Path, before: dict[str, int]) -> int:
        return len(self.idx.to_bytes())  # no incremental snapshot: the whole index again

    @classmethod
    def load(cls, files: dict[str, bytes], tmp: Path) -> Lucidrag:
        self = cls()
        self.idx = BM25Index.from_bytes(files["index.bin"])
        return self


class Bm25s:
    name = "bm25s"

    def __init__(self) -> None:
        import bm25s

        self.bm25s = bm25s
        self.model = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
        self.chunk_ids: list[str] = []
        self.removed: set[int] = set()

    def build(self, corpus: sc.TokenizedCorpus) -> float:
        from bm25s.tokenization import Tokenized

        ids, tfs, off = corpus.term_ids, corpus.tfs, corpus.offsets
        docs = [np.repeat(ids[off[c] : off[c + 1]], tfs[off[c] : off[c + 1]]).tolist() for c in range(corpus.n_chunks)]
        self.chunk_ids = [cid for f in range(corpus.n_files) for cid, _ in corpus.file_chunks(f)]
        vocab = {t: i for i, t in enumerate(corpus.vocab)}
        t0 = time.perf_counter()
        self.model.index(Tokenized(ids=docs, vocab=vocab), show_progress=False)
        spent = time.perf_counter() - t0
        del docs
        return spent

    def search(self, q: str) -> list[str]:
        voc = self.model.vocab_dict
        qids = [voc[t] for t in query_terms(q) if t in voc]
        if not qids:
            return []
        scores = self.model.get_scores_from_ids(qids)
        if self.removed:
            scores[list(self.removed)] = 0.0
        top = np.argpartition(-scores, 9)[:10]
        top = top[np.lexsort((top, -scores[top]))]
        return [self.chunk_ids[i] for i in top if scores[i] > 0]

    def n(self) -> int:
        return int(self.model.scores["num_docs"]) - len(self.removed)

    def df(self, term: str) -> int:
        i = self.model.vocab_dict.get(term)
        return 0 if i is None else int(self.model.scores["indptr"][i + 1] - self.model.scores["indptr"][i])

    def delete(self, f: int, chunks: list) -> None:
        # no delete: mask the file's documents out of the scores (df/N/avgdl stay those of the
        # old corpus); an exact delete is a full rebuild, timed separately as `rebuild`
        self.removed.update(range(f * sc.CHUNKS_PER_FILE, (f + 1) * sc.CHUNKS_PER_FILE))

    def add(self, f: int, chunks: list) -> None:
        raise NotImplementedError("bm25s has no incremental add: rebuild")

    def save(self, d: Path) -> dict[str, int]:
        d.mkdir(parents=True, exist_ok=True)
        self.model.save(str(d))
        (d / "chunk_ids.json").write_text(json.dumps(self.chunk_ids))
        return dir_files(d)

    def persist_after_change(self, d: Path, before: dict[str, int]) -> int:
        return sum(before.values())  # a rebuild rewrites everything

    @classmethod
    def load(cls, files: dict[str, bytes], tmp: Path) -> Bm25s:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        self = cls()
        self.model = self.bm25s.BM25.load(str(tmp), mmap=False)
        self.chunk_ids = json.loads(files["chunk_ids.json"])
        return self


class Tantivy:
    name = "tantivy"

    def __init__(self, path: Path | None = None) -> None:
        import tantivy

        self.t = tantivy
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
        sb.add_text_field("chunk", stored=True, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("file", stored=False, tokenizer_name="raw", index_option="basic")
        self.schema = sb.build()
        self.path = path
        self.index = None
        self.writer = None

    def _open(self, path: Path, create: bool) -> None:
        if create:
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            self.index = self.t.Index(self.schema, path=str(path), reuse=False)
        else:
            self.index = self.t.Index.open(str(path))
        self.path = path

    def _writer(self):
        if self.writer is None:
            self.writer = self.index.writer(heap_size=64_000_000, num_threads=1)
        return self.writer

    def _add_docs(self, f: int, chunks: list) -> None:
        w = self._writer()
        fid = sc.file_id(f)
        for cid, tfs in chunks:
            body = " ".join(" ".join([t] * n) if n > 1 else t for t, n in tfs.items())
            w.add_document(self.t.Document(body=body, chunk=cid, file=fid))

    def _commit(self) -> None:
        self.writer.commit()
        self.index.reload()
        self.searcher = self.index.searcher()

    def build(self, corpus: sc.TokenizedCorpus, path: Path) -> float:
        self._open(path, create=True)
        spent = 0.0
        for f in range(corpus.n_files):
            chunks = corpus.file_chunks(f)
            t0 = time.perf_counter()
            self._add_docs(f, chunks)
            spent += time.perf_counter() - t0
        t0 = time.perf_counter()
        self._commit()
        self.writer.wait_merging_threads()
        self.writer = None
        self.index.reload()
        self.searcher = self.index.searcher()
        return spent + time.perf_counter() - t0

    def search(self, q: str) -> list[str]:
        terms = query_terms(q)
        if not terms:
            return []
        Q, O = self.t.Query, self.t.Occur
        query = Q.boolean_query([(O.Should, Q.term_query(self.schema, "body", t, index_option="freq")) for t in terms])
        hits = self.searcher.search(query, 10).hits
        return [self.searcher.doc(addr)["chunk"][0] for _, addr in hits]

    def n(self) -> int:
        return self.searcher.num_docs

    def df(self, term: str) -> int:
        return self.searcher.doc_freq("body", term)

    def delete(self, f: int, chunks: list) -> None:
        self._writer().delete_documents("file", sc.file_id(f))
        self._commit()

    def add(self, f: int, chunks: list) -> None:
        self._add_docs(f, chunks)
        self._commit()

    def save(self, d: Path) -> dict[str, int]:
        return dir_files(self.path)  # commit already wrote the segments

    def persist_after_change(self, d: Path, before: dict[str, int]) -> int:
        after = dir_files(self.path)
        return sum(size for name, size in after.items() if before.get(name) != size)

    @classmethod
    def load(cls, files: dict[str, bytes], tmp: Path) -> Tantivy:
        for name, data in files.items():
            p = tmp / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        self = cls()
        self._open(tmp, create=False)
        self.searcher = self.index.searcher()
        return self


class Csr:
    name = "csr"

    def __init__(self) -> None:
        from csr_index import CsrIndex

        self.idx = CsrIndex()

    def build(self, corpus: sc.TokenizedCorpus) -> float:
        spent = 0.0
        for f in range(corpus.n_files):
            chunks = corpus.file_chunks(f)
            t0 = time.perf_counter()
            self.idx.add_file(sc.file_id(f), chunks)
            spent += time.perf_counter() - t0
        return spent

    def search(self, q: str) -> list[str]:
        return [c for c, _ in self.idx.search(q, 10)]

    def n(self) -> int:
        return self.idx.n

    def df(self, term: str) -> int:
        return self.idx.df(term)

    def delete(self, f: int, chunks: list) -> None:
        self.idx.remove_file(sc.file_id(f), chunks)

    def add(self, f: int, chunks: list) -> None:
        self.idx.add_file(sc.file_id(f), chunks)

    def save(self, d: Path) -> dict[str, int]:
        d.mkdir(parents=True, exist_ok=True)
        self.parts = self.idx.to_parts(PART_BYTES)
        for k, v in self.parts.items():
            (d / k).write_bytes(v)
        return dir_files(d)

    def persist_after_change(self, d: Path, before: dict[str, int]) -> int:
        new = self.idx.to_parts(PART_BYTES)
        return sum(len(v) for k, v in new.items() if self.parts.get(k) != v)

    @classmethod
    def load(cls, files: dict[str, bytes], tmp: Path) -> Csr:
        from csr_index import CsrIndex

        self = cls()
        self.idx = CsrIndex.from_parts(files)
        return self


class Segindex:
    """lucidrag.segindex.SegmentIndex, persisted the way the plugin does it: after every add or
    delete, take_changes() is applied to a storage stand-in (here the snapshot directory: new
    segments, then the manifest, then the dropped segments are deleted)."""

    name = "segindex"

    def __init__(self) -> None:
        from lucidrag.segindex import SegmentIndex

        self.idx = SegmentIndex()
        self.dir: Path | None = None
        self.written = 0  # bytes handed to storage over the whole build (lifetime rewrite volume)
        self.worst_add = (0.0, 0, 0)  # (seconds incl. merges and serialising, bytes to write, file no)
        self.biggest_add = (0.0, 0, 0)  # the same for the add that wrote the most bytes
        self.persist_s = 0.0
        self.adds: dict[str, float] = {}

    def _apply(self) -> int:
        t0 = time.perf_counter()
        ch = self.idx.take_changes()
        size = sum(map(len, ch.new_segments.values())) + len(ch.manifest)
        self.persist_s += time.perf_counter() - t0
        if self.dir is not None:
            for k, v in ch.new_segments.items():
                (self.dir / k).write_bytes(v)
            (self.dir / "manifest").write_bytes(ch.manifest)
            for k in ch.dropped_segments:
                (self.dir / k).unlink()
        self.written += size
        return size

    def build(self, corpus: sc.TokenizedCorpus, path: Path) -> float:
        self.dir = path
        path.mkdir(parents=True, exist_ok=True)
        spent = 0.0
        times = []
        for f in range(corpus.n_files):
            chunks = corpus.file_chunks(f)
            t0 = time.perf_counter()
            self.idx.add_file(sc.file_id(f), chunks)
            t1 = time.perf_counter()
            times.append(t1 - t0)
            p0 = self.persist_s
            size = self._apply()
            took = t1 - t0 + self.persist_s - p0
            spent += t1 - t0
            if took > self.worst_add[0]:
                self.worst_add = (took, size, f)
            if size > self.biggest_add[1]:
                self.biggest_add = (took, size, f)
        self.adds = {"p50_ms": statistics.median(times) * 1000, "p99_ms": pct(times, 0.99) * 1000,
                     "last_1000_mean_ms": statistics.mean(times[-1000:]) * 1000}
        return spent

    def search(self, q: str) -> list[str]:
        return [h.chunk_id for h in self.idx.search(q, 10)]

    def n(self) -> int:
        return len(self.idx)

    def df(self, term: str) -> int:
        return self.idx.document_frequency(term)

    def delete(self, f: int, chunks: list) -> None:
        self.idx.remove_file(sc.file_id(f), chunks)

    def add(self, f: int, chunks: list) -> None:
        self.idx.add_file(sc.file_id(f), chunks)

    def save(self, d: Path) -> dict[str, int]:
        self._apply()
        return dir_files(d)

    def persist_after_change(self, d: Path, before: dict[str, int]) -> int:
        return self._apply()

    def extra(self) -> dict[str, Any]:
        st = self.idx.stats()
        return {"segments": st["segments"], "index_bytes_mib": mib(st["bytes"]),
                "lifetime_written_mib": mib(self.written), "persist_total_s": self.persist_s,
                "worst_add_s": self.worst_add[0], "worst_add_write_mib": mib(self.worst_add[1]),
                "biggest_add_s": self.biggest_add[0], "biggest_add_write_mib": mib(self.biggest_add[1]),
                "adds": self.adds}

    def remove_slow_ms(self, f: int) -> float:
        t0 = time.perf_counter()
        self.idx.remove_file(sc.file_id(f), None)
        return (time.perf_counter() - t0) * 1000

    @classmethod
    def load(cls, files: dict[str, bytes], tmp: Path) -> Segindex:
        from lucidrag.segindex import SegmentIndex

        self = cls()
        self.idx = SegmentIndex.load(files["manifest"], files)
        return self


CANDIDATES = {"lucidrag": Lucidrag, "bm25s": Bm25s, "tantivy": Tantivy, "csr": Csr, "segindex": Segindex}


# ============================================================================ workers
def worker_build(cand: str, n: int, cache: Path, nq: int) -> dict[str, Any]:
    corpus = sc.tokenized_corpus(n, cache)
    queries = sc.make_queries(n, nq)
    snap = cache / "snap" / f"{cand}-{n}"
    shutil.rmtree(snap, ignore_errors=True)
    snap.parent.mkdir(parents=True, exist_ok=True)
    r0 = rss()
    c = CANDIDATES[cand]()
    if cand in ("tantivy", "segindex"):
        build_s = c.build(corpus, snap)
    else:
        build_s = c.build(corpus)
    r1 = rss()
    out: dict[str, Any] = {"candidate": cand, "chunks": n, "build_s": build_s, "build_rss_mib": mib(r1 - r0)}

    for q in queries[:5]:
        c.search(q[1])
    lat, tops, by_kind = [], [], {}
    for kind, q in queries:
        t0 = time.perf_counter()
        top = c.search(q)
        ms = (time.perf_counter() - t0) * 1000
        lat.append(ms)
        by_kind.setdefault(kind, []).append(ms)
        tops.append(top)
    out.update(p50_ms=statistics.median(lat), p95_ms=pct(lat, 0.95), max_ms=max(lat), tops=tops,
               by_kind={k: [statistics.median(v), pct(v, 0.95)] for k, v in by_kind.items()})

    t0 = time.perf_counter()
    files = c.save(snap)
    out.update(save_s=time.perf_counter() - t0, snapshot_mib=mib(sum(files.values())), snapshot_files=len(files),
               largest_file_mib=mib(max(files.values())),
               storage_values=sum(max(1, math.ceil(s / PART_BYTES)) for s in files.values()))
    before = dict(files)

    # delete one file in the middle; check df of its terms and N against the corpus
    victim = corpus.n_files // 2
    vchunks = corpus.file_chunks(victim)
    terms = sorted({t for _, tfs in vchunks for t in tfs})
    term_no = {t: i for i, t in enumerate(corpus.vocab)}
    truth0 = corpus.df([term_no[t] for t in terms])
    got0 = np.array([c.df(t) for t in terms])
    out["df_exact_before_delete"] = f"{int((got0 == truth0).sum())}/{len(terms)}"
    t0 = time.perf_counter()
    c.delete(victim, vchunks)
    out["delete_ms"] = (time.perf_counter() - t0) * 1000
    truth = corpus.df([term_no[t] for t in terms], skip_file=victim)
    got = np.array([c.df(t) for t in terms])
    out["df_exact_after_delete"] = f"{int((got == truth).sum())}/{len(terms)}"
    out["n_exact_after_delete"] = c.n() == n - sc.CHUNKS_PER_FILE
    still = sum(1 for kind, q in queries for cid in c.search(q) if cid in {x for x, _ in vchunks})
    out["deleted_chunks_returned"] = still

    newf = corpus.n_files + 1
    new_chunks = tokenize_chunks(sc.generate_file(newf))
    try:
        t0 = time.perf_counter()
        c.add(newf, new_chunks)
        out["add_ms"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        out["persist_bytes_after_delete_add"] = c.persist_after_change(snap, before)
        out["persist_s"] = time.perf_counter() - t0
    except NotImplementedError:
        out["add_ms"] = None
        out["persist_bytes_after_delete_add"] = sum(before.values())
    if cand == "bm25s":  # an exact delete/add = rebuild without the file
        out["rebuild_s"] = build_s
    if hasattr(c, "remove_slow_ms"):  # delete without the file's tokens (record lost)
        out["delete_slow_ms"] = c.remove_slow_ms(victim + 1)
        c.persist_after_change(snap, before)
    if hasattr(c, "extra"):
        out.update(c.extra())
    out["rss_end_mib"] = mib(rss())
    return out


def worker_load(cand: str, n: int, cache: Path, trace: bool) -> dict[str, Any]:
    snap = cache / "snap" / f"{cand}-{n}"
    q = sc.make_queries(n, 6)
    r0 = rss()
    t0 = time.perf_counter()
    files = {name: (snap / name).read_bytes() for name in dir_files(snap)}
    t_read = time.perf_counter() - t0
    tmp = Path(tempfile.mkdtemp(prefix=f"scale-{cand}-"))
    try:
        if trace:
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        c = CANDIDATES[cand].load(files, tmp)
        t_load = time.perf_counter() - t0
        if trace:
            cur, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        del files
        t0 = time.perf_counter()
        c.search(q[0][1])
        t_first = time.perf_counter() - t0
        r1 = rss()
        out = {"read_s": t_read, "load_s": t_load, "first_query_ms": t_first * 1000, "load_rss_mib": mib(r1 - r0)}
        if trace:
            out.update(traced_mib=mib(cur - base), traced_peak_mib=mib(peak - base))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def worker_records(n: int) -> dict[str, Any]:
    """What KnowledgeBaseState holds per chunk besides the index: FileRecords, ChunkRecords, texts."""
    from lucidrag.records import ChunkRecord, FileRecord

    n_files = n // sc.CHUNKS_PER_FILE
    texts = [sc.generate_file(f) for f in range(n_files)]  # generated first: not counted below
    raw = sum(len(t.encode()) for chunks in texts for _, t in chunks)
    r0 = rss()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    files: dict[str, FileRecord] = {}
    chunks: dict[str, ChunkRecord] = {}
    for f, fchunks in enumerate(texts):
        fid = sc.file_id(f)
        recs = []
        for j, (cid, text) in enumerate(fchunks):
            # the state holds a fresh str per chunk (decoded from storage / the vector DB)
            recs.append(ChunkRecord(cid[:8] + cid[8:], fid, j, ("Manual > Section %d\n" % (j // 5)) + text,
                                    heading="Manual > Section %d" % (j // 5), page=1 + j // 3, parent=j // 5))
        rec = FileRecord(fid, "pdf", recs, parents=["".join(t for _, t in fchunks[k:k + 5]) for k in range(0, 20, 5)])
        files[fid] = rec
        for c in recs:
            chunks[c.chunk_id] = c
    cur = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    r1 = rss()
    blobs = [files[sc.file_id(f)].to_bytes() for f in range(n_files)]
    t0 = time.perf_counter()
    for b in blobs:
        FileRecord.from_bytes(b)
    t_decode = time.perf_counter() - t0
    return {"chunks": n, "traced_mib": mib(cur), "rss_mib": mib(r1 - r0), "bytes_per_chunk": cur / n,
            "raw_text_bytes_per_chunk": raw / n, "record_blob_mib": mib(sum(map(len, blobs))),
            "decode_records_s": t_decode}


# ============================================================================ driver
def run_worker(args: list[str], timeout: int) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:200], "wall_s": time.perf_counter() - t0}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t0
    return res


def overlap(tops: list[list[str]], ref: list[list[str]]) -> float | None:
    vals = [len(set(a) & set(b)) / 10 for a, b in zip(tops, ref) if len(b) == 10]
    return statistics.mean(vals) if vals else None


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", default="10000,100000")
    ap.add_argument("--candidates", default="lucidrag,bm25s,tantivy,csr")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--timeout", type=int, default=900, help="per worker process, seconds")
    ap.add_argument("--records", default="", help="also measure FileRecord/ChunkRecord memory at these sizes")
    ap.add_argument("--json", type=Path, help="write all results here")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        kind, *rest = a.worker
        if kind == "build":
            res = worker_build(rest[0], int(rest[1]), a.cache_dir, a.queries)
        elif kind == "load":
            res = worker_load(rest[0], int(rest[1]), a.cache_dir, rest[2] == "trace")
        else:
            res = worker_records(int(rest[0]))
        print(json.dumps(res))
        return

    print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"(shared), {mib(psutil.virtual_memory().total) / 1024:.0f} GiB RAM")
    import bm25s
    import tantivy  # noqa: F401
    from importlib.metadata import version

    print(f"# bm25s {version('bm25s')}, tantivy {version('tantivy')}, numpy {np.__version__}")
    results: list[dict[str, Any]] = []
    sizes = [int(s) for s in a.chunks.split(",") if s]
    for n in sizes:
        corpus = sc.tokenized_corpus(n, a.cache_dir)  # builds the cache if needed
        info = sc.cache_info(a.cache_dir, n)
        per_chunk_tok = info["tokenize_s"] / info["chunks"] if info else float("nan")
        print(f"\n## {n:,} chunks in {corpus.n_files:,} files: {len(corpus.vocab):,} terms, "
              f"{int(corpus.offsets[-1]):,} postings ({int(corpus.offsets[-1]) / n:.0f} distinct terms/chunk); "
              f"tokenising (shared by all) ≈ {per_chunk_tok * n:.1f} s ({1 / per_chunk_tok:,.0f} chunks/s)")
        del corpus
        ref = None
        for cand in a.candidates.split(","):
            res = run_worker(["--worker", "build", cand, str(n), "--queries", str(a.queries),
                              "--cache-dir", str(a.cache_dir)], a.timeout)
            if "error" not in res:
                res.update(run_worker(["--worker", "load", cand, str(n), "plain", "--cache-dir", str(a.cache_dir)],
                                      a.timeout))
                if n <= 100_000:
                    tr = run_worker(["--worker", "load", cand, str(n), "trace", "--cache-dir", str(a.cache_dir)],
                                    a.timeout)
                    res["traced_mib"] = tr.get("traced_mib")
            res.setdefault("candidate", cand)
            res["chunks"] = n
            if cand == "lucidrag" and "tops" in res:
                ref = res["tops"]
            res["overlap10"] = overlap(res["tops"], ref) if ref and "tops" in res else None
            results.append(res)
            print(f"  {cand}: " + ("ERROR " + res["error"] if "error" in res else
                                   f"build {res['build_s']:.1f} s, load {res.get('load_s', float('nan')):.2f} s, "
                                   f"p95 {res['p95_ms']:.1f} ms (worker wall {res['wall_s']:.0f} s)"), flush=True)
    print_table(results)
    if a.records:
        print("\n## What KnowledgeBaseState holds per chunk besides the index (FileRecord + ChunkRecord + texts)")
        print("| chunks | tracemalloc MiB | RSS Δ MiB | B/chunk | raw text B/chunk | record blobs MiB | decode all records s |")
        print("|---|---|---|---|---|---|---|")
        for n in (int(s) for s in a.records.split(",")):
            r = run_worker(["--worker", "records", str(n)], a.timeout)
            results.append({"records": r})
            if "error" in r:
                print(f"| {n:,} | ERROR {r['error']} |")
                continue
            print(f"| {n:,} | {r['traced_mib']:.0f} | {r['rss_mib']:.0f} | {r['bytes_per_chunk']:.0f} | "
                  f"{r['raw_text_bytes_per_chunk']:.0f} | {r['record_blob_mib']:.1f} | {r['decode_records_s']:.2f} |")
    if a.json:
        for r in results:
            r.pop("tops", None)
        a.json.write_text(json.dumps(results, indent=1))


def print_table(results: list[dict[str, Any]]) -> None:
    cols = [
        ("candidate", "candidate", 0), ("chunks", "chunks", 0), ("build_s", "build s", 1),
        ("build_rss_mib", "RSS Δ build MiB", 0), ("load_rss_mib", "RSS Δ restart MiB", 0),
        ("traced_mib", "tracemalloc MiB", 0), ("snapshot_mib", "snapshot MiB", 1),
        ("storage_values", "≤4 MiB values", 0), ("load_s", "restart load s", 2), ("first_query_ms", "1st query ms", 1),
        ("p50_ms", "p50 ms", 2), ("p95_ms", "p95 ms", 2), ("overlap10", "overlap@10", 3),
        ("delete_ms", "delete 1 file ms", 1), ("df_exact_before_delete", "df exact before", 0),
        ("df_exact_after_delete", "df exact after delete", 0),
        ("n_exact_after_delete", "N exact", 0), ("add_ms", "add 1 file ms", 1),
        ("persist_bytes_after_delete_add", "bytes to persist after delete+add", 0),
    ]
    print("\n| " + " | ".join(h for _, h, _ in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        if "error" in r:
            print(f"| {r['candidate']} | {r['chunks']:,} | ERROR: {r['error']} |")
            continue
        cells = []
        for key, _, nd in cols:
            v = r.get(key)
            if key == "persist_bytes_after_delete_add" and v is not None:
                v = f"{mib(v):.2f} MiB"
            cells.append(fmt(v, nd))
        print("| " + " | ".join(cells) + " |")
    for r in results:
        if "worst_add_s" in r:
            print(f"  {r['candidate']} {r['chunks']:,}: {r['segments']} segments, {r['index_bytes_mib']:.0f} MiB "
                  f"(stats), worst single add incl. merges + serialising {r['worst_add_s']:.2f} s and "
                  f"{r['worst_add_write_mib']:.1f} MiB to write; the biggest write {r['biggest_add_write_mib']:.1f} MiB "
                  f"in {r['biggest_add_s']:.2f} s; add_file p50/p99 {r['adds']['p50_ms']:.1f}/{r['adds']['p99_ms']:.1f} ms "
                  f"(mean of the last 1,000: {r['adds']['last_1000_mean_ms']:.1f} ms); written over the build "
                  f"{r['lifetime_written_mib']:,.0f} MiB (serialising {r['persist_total_s']:.1f} s), "
                  f"delete without tokens {r['delete_slow_ms']:.1f} ms")
    for r in results:
        if "by_kind" in r:
            print(f"  {r['candidate']} {r['chunks']:,} p50/p95 ms by query kind: " + ", ".join(
                f"{k} {v[0]:.1f}/{v[1]:.1f}" for k, v in r["by_kind"].items()))


if __name__ == "__main__":
    main()
