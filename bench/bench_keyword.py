"""Benchmark the tokeniser (lucidrag.index.terms) and the reference BM25 index (tests/reference_bm25.py) on a synthetic mixed English/Chinese corpus.

    .venv/bin/python bench/bench_keyword.py [--sizes 10000,100000] [--queries 200] [--seed 7]
                                              [--no-doc-unigrams]

The corpus is seeded and Zipf-distributed: ~20k English pseudo-words and ~30k Chinese words
(1-4 characters over ~3,500 Han characters), chunks of ~400 characters (50% English, 30%
Chinese, 20% mixed) sprinkled with product/error codes, in files of 20 chunks. Prints build
time, index memory (tracemalloc current after building, and peak while building), serialised
size (whole index and the sum of per-file blobs), search latency p50/p95 over the queries, the
cost of removing one file, and a known-item check (does the chunk a query was cut from rank
in the top 10). `--no-doc-unigrams` turns off the document-side CJK unigrams to measure them.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lucidrag.index import terms as keyword  # noqa: E402
from lucidrag.index.terms import tokenize_chunks  # noqa: E402
from tests.reference_bm25 import BM25Index, encode_tokenized  # noqa: E402

CHUNKS_PER_FILE = 20
CHUNK_CHARS = 400


class Corpus:
    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.rng = rng
        syll = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
        en = set()
        while len(en) < 20_000:
            en.add("".join(rng.choice(syll) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))))
        self.en = sorted(en)
        rng.shuffle(self.en)
        hanzi = [chr(c) for c in rng.sample(range(0x4E00, 0x9FA6), 3500)]
        # character frequencies are Zipf too: words draw characters from a skewed pool
        han_w = [1.0 / (i + 1) ** 0.9 for i in range(len(hanzi))]
        zh = set()
        while len(zh) < 30_000:
            n = rng.choices((1, 2, 3, 4), (25, 55, 12, 8))[0]
            zh.add("".join(rng.choices(hanzi, han_w, k=n)))
        self.zh = sorted(zh)
        rng.shuffle(self.zh)
        self.en_w = self._zipf(len(self.en))
        self.zh_w = self._zipf(len(self.zh))
        self.codes = [f"ERR-{n}" for n in range(100, 1000)] + [f"A{n}" for n in range(1000, 9999, 7)]

    @staticmethod
    def _zipf(n: int, s: float = 1.07) -> list[float]:
        acc, out = 0.0, []
        for i in range(n):
            acc += 1.0 / (i + 1) ** s
            out.append(acc)
        return out

    def en_words(self, k: int) -> list[str]:
        return self.rng.choices(self.en, cum_weights=self.en_w, k=k)

    def zh_words(self, k: int) -> list[str]:
        return self.rng.choices(self.zh, cum_weights=self.zh_w, k=k)

    def chunk(self) -> str:
        r = self.rng.random()
        parts: list[str] = []
        size = 0
        while size < CHUNK_CHARS:
            if r < 0.5 or (r >= 0.8 and self.rng.random() < 0.5):
                words = self.en_words(self.rng.randint(6, 14))
                if self.rng.random() < 0.1:
                    words.append(self.rng.choice(self.codes))
                s = " ".join(words).capitalize() + ". "
            else:
                s = "".join(self.zh_words(self.rng.randint(5, 12))) + "。"
            parts.append(s)
            size += len(s)
        return "".join(parts)[:CHUNK_CHARS]


def make_files(corpus: Corpus, n_chunks: int) -> dict[str, list[tuple[str, str]]]:
    files: dict[str, list[tuple[str, str]]] = {}
    for i in range(0, n_chunks, CHUNKS_PER_FILE):
        fid = f"file-{i // CHUNKS_PER_FILE:06d}"
        files[fid] = [(f"{fid}-{j}", corpus.chunk()) for j in range(min(CHUNKS_PER_FILE, n_chunks - i))]
    return files


def make_queries(corpus: Corpus, files, n: int) -> list[tuple[str, str]]:
    """(query, chunk id it was cut from): English words, a Chinese span, a code, mixed."""
    rng = random.Random(1234)
    all_chunks = [c for chunks in files.values() for c in chunks]
    out = []
    for i in range(n):
        cid, text = rng.choice(all_chunks)
        kind = i % 4
        if kind == 0:  # a few English words from the chunk
            words = [w for w in text.replace(".", " ").split() if w.isascii()]
            q = " ".join(rng.sample(words, min(3, len(words)))) if words else text[:8]
        elif kind == 1:  # a 4-8 character Chinese span
            spans = [s for s in text.split("。") if len(s) >= 4 and not s.isascii()]
            if spans:
                s = rng.choice(spans)
                start = rng.randrange(0, max(1, len(s) - 8))
                q = s[start : start + rng.randint(4, 8)]
            else:
                q = text[:20]
        elif kind == 2:  # a code, or fall back to words
            codes = [w.strip(".") for w in text.split() if w.strip(".") in set(corpus.codes)]
            if codes:
                q = rng.choice(codes)
            else:  # no code in this chunk: one rare-ish English word and a 2-char Chinese word
                q = corpus.en_words(1)[0] + " " + corpus.zh_words(1)[0]
                cid = ""
        else:  # generic question mixing both languages
            q = " ".join(corpus.en_words(2)) + " " + "".join(corpus.zh_words(2))
            cid = ""
        out.append((q, cid))
    return out


def traced_index(files: dict[str, list[tuple[str, str]]]) -> tuple[BM25Index, int, int]:
    """The reference index of `files`, built under tracemalloc: (index, bytes it holds, peak bytes
    while building)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    idx = BM25Index()
    for fid, chunks in files.items():
        idx.add(fid, chunks)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return idx, current - base, peak - base


def raw_text_bytes(files: dict[str, list[tuple[str, str]]]) -> int:
    return sum(len(t.encode()) for c in files.values() for _, t in c)


def measure(n_chunks: int, n_queries: int, seed: int) -> None:
    corpus = Corpus(seed)
    files = make_files(corpus, n_chunks)
    queries = make_queries(corpus, files, n_queries)
    print(f"\n== {n_chunks:,} chunks in {len(files):,} files "
          f"(doc CJK unigrams: {'on' if keyword._DOC_CJK_UNIGRAMS else 'off'}) ==")

    gc.collect()
    t0 = time.perf_counter()
    tokenized = {fid: tokenize_chunks(chunks) for fid, chunks in files.items()}
    t_tok = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx = BM25Index()
    for fid, toks in tokenized.items():
        idx.add_tokenized(fid, toks)
    t_add = time.perf_counter() - t0
    blob_sizes = sum(len(encode_tokenized(t)) for t in tokenized.values())
    del tokenized
    print(f"build: tokenise {t_tok:.2f} s + index {t_add:.2f} s = {t_tok + t_add:.2f} s "
          f"({n_chunks / (t_tok + t_add):,.0f} chunks/s)")
    st = idx.stats()
    print(f"stats: {st['terms']:,} terms, {st['postings']:,} postings, avgdl {st['avgdl']:.0f}")

    # memory: build again under tracemalloc (slower, so timed separately above)
    del idx
    idx, held, peak = traced_index(files)
    print(f"memory: index {held / 2**20:.1f} MiB "
          f"({held / n_chunks:.0f} B/chunk), peak while building {peak / 2**20:.1f} MiB "
          f"(raw text: {raw_text_bytes(files) / 2**20:.1f} MiB)")

    t0 = time.perf_counter()
    blob = idx.to_bytes()
    t_ser = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = BM25Index.from_bytes(blob)
    t_de = time.perf_counter() - t0
    print(f"serialised: whole index {len(blob) / 2**20:.1f} MiB (to_bytes {t_ser:.2f} s, "
          f"from_bytes {t_de:.2f} s); per-file blobs total {blob_sizes / 2**20:.1f} MiB")
    del again

    lat = []
    by_kind: dict[str, list[float]] = {}
    hits = total = 0
    for i, (q, cid) in enumerate(queries):
        t0 = time.perf_counter()
        res = idx.search(q, 10)
        lat.append((time.perf_counter() - t0) * 1000)
        by_kind.setdefault(("english", "chinese", "code", "mixed")[i % 4], []).append(lat[-1])
        if cid:
            total += 1
            hits += cid in [c for c, _ in res]
    lat.sort()
    p95 = lat[int(0.95 * (len(lat) - 1))]
    print(f"search top-10: p50 {statistics.median(lat):.2f} ms, p95 {p95:.2f} ms, "
          f"max {lat[-1]:.2f} ms over {len(lat)} queries; known-item hit@10 {hits}/{total}")
    print("  by kind (p50/p95 ms): " + ", ".join(
        f"{k} {statistics.median(v):.2f}/{sorted(v)[int(0.95 * (len(v) - 1))]:.2f}"
        for k, v in by_kind.items()))
    one_char = [q for q in "".join(corpus.zh[:200]) if q not in keyword._CJK_STOP_CHARS][:50]
    found = sum(1 for q in one_char if idx.search(q, 1))
    print(f"single-character queries with a hit: {found}/{len(one_char)}")

    fid = next(iter(files))
    t0 = time.perf_counter()
    idx.remove(fid)
    t_rm = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx.compact()
    t_cp = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx.add(fid, files[fid])
    t_re = time.perf_counter() - t0
    print(f"remove one file {t_rm * 1000:.2f} ms, forced compact {t_cp:.2f} s, "
          f"re-add {t_re * 1000:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-doc-unigrams", action="store_true")
    args = ap.parse_args()
    if args.no_doc_unigrams:
        keyword._DOC_CJK_UNIGRAMS = False
    print(f"Python {sys.version.split()[0]}")
    for n in (int(s) for s in args.sizes.split(",")):
        measure(n, args.queries, args.seed)


if __name__ == "__main__":
    main()
