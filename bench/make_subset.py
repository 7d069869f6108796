"""Build the small benchmark subsets in bench/data/ from the upstream files.

Nothing is downloaded here: point the script at local copies of the upstream
files (see bench/data/*/SOURCE.md for where they come from and their hashes).

    python bench/make_subset.py scifact --src /path/to/scifact.zip
    python bench/make_subset.py drcd --src /path/to/DRCD/   # holds DRCD_dev.json, DRCD_test.json
    python bench/make_subset.py cisi --src /path/to/CISI/   # holds CISI.ALL, CISI.QRY, CISI.REL
    python bench/make_subset.py cmrc --src /path/to/cmrc2018_dev.json

Output per set (bench/data/<name>/): corpus.jsonl.gz ({"_id","title","text"}),
queries.jsonl.gz ({"_id","text"}), qrels.tsv.gz ("query-id\tcorpus-id\tscore",
with a header line) -- the BEIR layout, gzip'd with a fixed mtime so reruns are
byte-identical.
"""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import io
import json
import random
import re
import tokenize
import zipfile
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
SEED = 20240601


def _write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    buf = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(buf)


def _write_qrels_gz(path: Path, qrels: dict[str, dict[str, int]]) -> None:
    lines = ["query-id\tcorpus-id\tscore"]
    for qid in qrels:
        for did, score in qrels[qid].items():
            lines.append(f"{qid}\t{did}\t{score}")
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(("\n".join(lines) + "\n").encode("utf-8"))


def _write(name: str, corpus: list[dict], queries: list[dict], qrels: dict[str, dict[str, int]]) -> None:
    out = DATA_DIR / name
    out.mkdir(parents=True, exist_ok=True)
    _write_jsonl_gz(out / "corpus.jsonl.gz", corpus)
    _write_jsonl_gz(out / "queries.jsonl.gz", queries)
    _write_qrels_gz(out / "qrels.tsv.gz", qrels)
    n_judg = sum(len(v) for v in qrels.values())
    print(f"{name}: {len(corpus)} docs, {len(queries)} queries, {n_judg} judgments -> {out}")


# --------------------------------------------------------------------------- SciFact
def _sentences(literal: str) -> list[str]:
    """The abstract column is a numpy-style repr: "['s1'\\n 's2' ...]" (no commas)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(literal).readline):
        if tok.type == tokenize.STRING:
            out.append(ast.literal_eval(tok.string))
    return out


def build_scifact(src: Path, n_docs: int) -> None:
    csv.field_size_limit(1 << 30)
    with zipfile.ZipFile(src) as zf:
        corpus_rows = list(csv.DictReader(io.TextIOWrapper(zf.open("corpus_train.csv"), "utf-8")))
        claim_rows = list(csv.DictReader(io.TextIOWrapper(zf.open("claims_validation.csv"), "utf-8")))
    # BEIR's SciFact "test" split = the original dev claims (here: claims_validation.csv),
    # judged docs = cited_doc_ids, relevance 1 (300 queries, 339 judgments).
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for r in claim_rows:
        qid = r["id"]
        queries[qid] = r["claim"]
        for did in r["cited_doc_ids"].strip("[]").split():
            qrels.setdefault(qid, {})[did] = 1
    docs = {}
    for r in corpus_rows:
        docs[r["doc_id"]] = {"_id": r["doc_id"], "title": r["title"], "text": " ".join(_sentences(r["abstract"]))}
    judged = sorted({d for q in qrels.values() for d in q}, key=int)
    missing = [d for d in judged if d not in docs]
    assert not missing, missing
    rng = random.Random(SEED)
    others = sorted(set(docs) - set(judged), key=int)
    keep = set(judged) | set(rng.sample(others, max(0, n_docs - len(judged))))
    corpus = [docs[d] for d in sorted(keep, key=int)]
    qlist = [{"_id": q, "text": queries[q]} for q in sorted(qrels, key=int)]
    _write("scifact", corpus, qlist, {q: qrels[q] for q in sorted(qrels, key=int)})


# --------------------------------------------------------------------------- DRCD
_SENT_END = re.compile(r"(?<=[。！？!?])")


def _split_sentences(ctx: str) -> list[tuple[int, str]]:
    """(start offset, sentence) pairs; sentences end at 。！？!? (the mark stays with its sentence)."""
    out, pos = [], 0
    for s in _SENT_END.split(ctx):
        if s.strip():  # blank pieces (e.g. trailing spaces) are dropped, offsets still advance
            out.append((pos, s))
        pos += len(s)
    return out


def build_drcd(src: Path, n_queries: int, n_docs: int) -> None:
    """ReQA-style sentence retrieval: a question's relevant doc is the sentence holding its answer.

    Whole articles (all their sentences) are drawn at random until about n_docs sentences are in
    the corpus, so every query competes with the other sentences of its own article and
    paragraph. Questions come from DRCD_test.json only (one per paragraph where possible), and only those whose
    (first, human-annotated) answer span lies inside a single sentence.
    """
    articles = []
    for split in ("DRCD_test.json", "DRCD_dev.json"):
        for art in json.loads((src / split).read_text("utf-8"))["data"]:
            articles.append((split, art))
    rng = random.Random(SEED)
    rng.shuffle(articles)
    corpus, candidates = [], []
    for split, art in articles:
        if len(corpus) >= n_docs:
            break
        for p in art["paragraphs"]:
            spans = []
            for i, (start, sent) in enumerate(_split_sentences(p["context"])):
                did = f"{p['id']}-s{i}"
                corpus.append({"_id": did, "title": art["title"], "text": sent})
                spans.append((start, start + len(sent), did))
            if split != "DRCD_test.json":
                continue
            for qa in p["qas"]:
                ans = qa["answers"][0]
                a0, a1 = ans["answer_start"], ans["answer_start"] + len(ans["text"])
                hit = [did for s0, s1, did in spans if s0 <= a0 and a1 <= s1]
                if hit and p["context"][a0:a1] == ans["text"]:
                    candidates.append((qa["id"], qa["question"], p["id"], hit[0]))
    ids = [d["_id"] for d in corpus]
    assert len(ids) == len(set(ids)), "duplicate sentence ids"
    # prefer one question per paragraph; take second questions only if short of n_queries
    rng.shuffle(candidates)
    seen, picked, rest = set(), [], []
    for qid, text, pid, did in candidates:
        (rest if pid in seen else picked).append((qid, text, did))
        seen.add(pid)
    picked = (picked + rest)[:n_queries]
    picked.sort()
    queries = [{"_id": q, "text": t} for q, t, _ in picked]
    qrels = {q: {did: 1} for q, _, did in picked}
    _write("drcd", corpus, queries, qrels)


# --------------------------------------------------------------------------- CISI
def _cisi_records(text: str) -> dict[str, dict[str, str]]:
    """CISI.ALL / CISI.QRY: records start with ".I <id>", fields with ".T" ".A" ".W" ".X" ".B"."""
    records: dict[str, dict[str, str]] = {}
    current: dict[str, list[str]] = {}
    field = ""
    for line in text.splitlines():
        m = re.match(r"^\.([IATWXB])\b ?(.*)$", line)
        if m and m.group(1) == "I":
            current = {}
            records[m.group(2).strip()] = current  # type: ignore[assignment]
            field = ""
        elif m:
            field = m.group(1)
            current.setdefault(field, [])
        elif field:
            current[field].append(line)
    return {i: {f: " ".join(" ".join(lines).split()) for f, lines in r.items()} for i, r in records.items()}


def build_cisi(src: Path) -> None:
    """Whole CISI collection: 1,460 library-science abstracts; the queries with judgments."""
    docs = _cisi_records((src / "CISI.ALL").read_text("utf-8", errors="replace"))
    qrys = _cisi_records((src / "CISI.QRY").read_text("utf-8", errors="replace"))
    qrels: dict[str, dict[str, int]] = {}
    for line in (src / "CISI.REL").read_text("utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            qrels.setdefault(parts[0], {})[parts[1]] = 1
    corpus = [{"_id": i, "title": d.get("T", ""), "text": d.get("W", "")} for i, d in docs.items() if d.get("W")]
    ids = {d["_id"] for d in corpus}
    qrels = {q: {d: g for d, g in rel.items() if d in ids} for q, rel in sorted(qrels.items(), key=lambda x: int(x[0]))}
    qrels = {q: rel for q, rel in qrels.items() if rel and qrys.get(q, {}).get("W")}
    queries = [{"_id": q, "text": qrys[q]["W"]} for q in qrels]
    _write("cisi", corpus, queries, qrels)


# --------------------------------------------------------------------------- CMRC 2018
def build_cmrc(src: Path, n_queries: int, n_docs: int) -> None:
    """CMRC 2018 dev (Simplified Chinese Wikipedia MRC) as sentence retrieval, as build_drcd:
    whole articles until about n_docs sentences; a question's relevant doc is the sentence that
    holds its answer (this copy has no answer offsets: only answers found exactly once in the
    paragraph, inside one sentence, are used)."""
    paragraphs = json.loads(src.read_text("utf-8"))
    by_title: dict[str, list[dict]] = {}
    for p in paragraphs:
        by_title.setdefault(p["title"], []).append(p)
    titles = sorted(by_title)
    rng = random.Random(SEED)
    rng.shuffle(titles)
    corpus, candidates = [], []
    for title in titles:
        if len(corpus) >= n_docs:
            break
        for p in by_title[title]:
            ctx = p["context_text"]
            spans = []
            for i, (start, sent) in enumerate(_split_sentences(ctx)):
                did = f"{p['context_id']}-s{i}"
                corpus.append({"_id": did, "title": title, "text": sent})
                spans.append((start, start + len(sent), did))
            for qa in p["qas"]:
                answer = qa["answers"][0]
                if not answer or ctx.count(answer) != 1:
                    continue
                a0 = ctx.index(answer)
                hit = [did for s0, s1, did in spans if s0 <= a0 and a0 + len(answer) <= s1]
                if hit:
                    candidates.append((qa["query_id"], qa["query_text"], p["context_id"], hit[0]))
    ids = [d["_id"] for d in corpus]
    assert len(ids) == len(set(ids)), "duplicate sentence ids"
    rng.shuffle(candidates)
    seen, picked, rest = set(), [], []
    for qid, text, pid, did in candidates:
        (rest if pid in seen else picked).append((qid, text, did))
        seen.add(pid)
    picked = (picked + rest)[:n_queries]
    picked.sort()
    queries = [{"_id": q, "text": t} for q, t, _ in picked]
    qrels = {q: {did: 1} for q, _, did in picked}
    _write("cmrc", corpus, queries, qrels)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=["scifact", "drcd", "cisi", "cmrc"])
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=None, help="corpus size (scifact: 3000 docs; drcd: ~5000 sentences; cmrc: ~2000 sentences)")
    ap.add_argument("--queries", type=int, default=300, help="drcd: number of questions to sample")
    a = ap.parse_args()
    if a.name == "scifact":
        build_scifact(a.src, a.docs or 3000)
    elif a.name == "cisi":
        build_cisi(a.src)
    elif a.name == "cmrc":
        build_cmrc(a.src, a.queries, a.docs or 2000)
    else:
        build_drcd(a.src, a.queries, a.docs or 5000)


if __name__ == "__main__":
    main()
