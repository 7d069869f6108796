"""Build the small benchmark subsets in bench/data/ from the upstream files.

Nothing is downloaded here: point the script at local copies of the upstream
files (see bench/data/*/SOURCE.md for where they come from and their hashes).

    python bench/make_subset.py scifact --src /path/to/scifact.zip
    python bench/make_subset.py drcd --src /path/to/DRCD/   # holds DRCD_dev.json, DRCD_test.json
    python bench/make_subset.py cisi --src /path/to/CISI/   # holds CISI.ALL, CISI.QRY, CISI.REL
    python bench/make_subset.py cmrc --src /path/to/cmrc2018_dev.json
    python bench/make_subset.py medquad --src /path/to/MedQuAD/        # + the LiveQA test questions file
    python bench/make_subset.py medquad-pages --src /path/to/MedQuAD/  # (see data/medquad*/SOURCE.md)

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


# --------------------------------------------------------------------------- MedQuAD + LiveQA
LIVEQA_QRELS_ZIP = "QA-TestSet-LiveQA-Med-Qrels-2479-Answers.zip"
LIVEQA_QUESTIONS = "TREC-2017-LiveQA-Medical-Test-Questions-w-summaries.xml"
# LiveQA judgments -> gains: 4-Excellent 3, 3-Incomplete 2, 2-Related 1; 1-Incorrect is not relevant.
_LIVEQA_GAIN = {"4-Excellent": 3, "3-Incomplete": 2, "2-Related": 1, "1-Incorrect": 0}
_ANSWER_ID = re.compile(r"^([A-Za-z]+)_(.+)_Sec(\d+)\.txt$")
# MedQuAD sources whose XML keeps the answers (MedlinePlus A.D.A.M., drugs and herbs were emptied).
_MEDQUAD_FULL_SOURCES = ("CDC", "CancerGov", "GARD", "GHR", "MPlusHealthTopics", "NHLBI", "NIDDK",
                         "NIHSeniorHealth", "NINDS")
MEDQUAD_MIN_SECTIONS = 5  # medquad-pages: pages drawn beside the judged ones have at least this many


def _liveqa_judgments(src: Path) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """([(query id, judgment, answer id)], {answer id: "Question: ...\nURL: ...\nAnswer: ..."})."""
    csv.field_size_limit(1 << 30)
    with zipfile.ZipFile(src / LIVEQA_QRELS_ZIP) as zf:
        names = {Path(n).name: n for n in zf.namelist() if not n.startswith("__MACOSX")}
        qrels_name = next(n for n in names if n.startswith("All-qrels"))
        judged = [tuple(line.split()) for line in zf.read(names[qrels_name]).decode("utf-8").splitlines() if line.strip()]
        answers_csv = io.TextIOWrapper(zf.open(names["All-2479-Answers-retrieved-from-MedQuAD.csv"]), "utf-8")
        answers = {r["AnswerID"]: r["Answer"] for r in csv.DictReader(answers_csv)}
    return judged, answers  # type: ignore[return-value]


def _liveqa_questions(src: Path) -> dict[str, str]:
    """LiveQA 2017 medical test questions: "TQ<n>" -> the assessors' paraphrase (else the NLM
    summary, else the consumer's own subject and message)."""
    import xml.etree.ElementTree as ET

    out = {}
    for q in ET.parse(src / LIVEQA_QUESTIONS).getroot().iter("NLM-QUESTION"):
        orig = q.find("Original-Question")
        fallback = " ".join(x for x in ((orig.findtext("SUBJECT") or ""), (orig.findtext("MESSAGE") or "")) if x) if orig is not None else ""
        for text in (q.findtext("NIST-PARAPHRASE"), q.findtext("NLM-Summary"), fallback):
            if text and text.strip():
                out[q.get("qid", "")] = " ".join(text.split())
                break
    return out


def build_medquad(src: Path) -> None:
    """FAQ retrieval: the 1,935 distinct MedQuAD question-answer entries judged for the TREC 2017
    LiveQA medical test questions (each entry one document: its question as the title, its
    answer as the text); queries = the test questions with at least one entry judged Related or
    better (graded: Excellent 3, Incomplete 2, Related 1)."""
    judged, answers = _liveqa_judgments(src)
    questions = _liveqa_questions(src)
    corpus = []
    for aid in sorted(answers):
        head, _, answer = answers[aid].partition("\nAnswer:")
        title = head.split("\n", 1)[0].removeprefix("Question:").strip()
        corpus.append({"_id": aid.removesuffix(".txt"), "title": " ".join(title.split()), "text": " ".join(answer.split())})
    qrels: dict[str, dict[str, int]] = {}
    for qid, judgment, aid in judged:
        gain = _LIVEQA_GAIN[judgment]
        if gain:
            rel = qrels.setdefault(f"TQ{qid}", {})
            rel[aid.removesuffix(".txt")] = max(gain, rel.get(aid.removesuffix(".txt"), 0))
    order = sorted(qrels, key=lambda q: int(q[2:]))
    queries = [{"_id": q, "text": questions[q]} for q in order]
    _write("medquad", corpus, queries, {q: qrels[q] for q in order})


def _medquad_pages(src: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """MedQuAD XML pages of the sources that keep their answers: "<source>_<file id>" ->
    (focus, [(question, answer)] in page order, empty answers dropped)."""
    import xml.etree.ElementTree as ET

    pages = {}
    for path in sorted(src.glob("*_QA*/*.xml")):
        root = ET.parse(path).getroot()
        source = root.get("source") or ""
        if source not in _MEDQUAD_FULL_SOURCES:
            continue
        sections = []
        for pair in root.iter("QAPair"):
            question = " ".join((pair.findtext("Question") or "").split())
            answer = "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", pair.findtext("Answer") or "") if p.strip())
            if answer:
                sections.append((question, answer))
        if sections:
            pages[f"{source}_{path.stem}"] = (" ".join((root.findtext("Focus") or "").split()), sections)
    return pages


def build_medquad_pages(src: Path, n_docs: int) -> None:
    """Long pages with many sections: whole MedQuAD health-topic pages (each QA pair of a page one
    Markdown section: "## <question>" then its answer), relevance lifted from the LiveQA
    judgments of their sections to the page (the best gain of any of its sections). Corpus =
    every page holding a judged section, then pages of at least MIN_SECTIONS sections drawn at
    random until n_docs; queries = the test questions with a relevant page."""
    judged, _ = _liveqa_judgments(src)
    questions = _liveqa_questions(src)
    pages = _medquad_pages(src)
    qrels: dict[str, dict[str, int]] = {}
    judged_pages = set()
    for qid, judgment, aid in judged:
        m = _ANSWER_ID.match(aid)
        page = f"{m.group(1)}_{m.group(2)}" if m else ""
        if page not in pages:
            continue
        judged_pages.add(page)
        gain = _LIVEQA_GAIN[judgment]
        if gain:
            rel = qrels.setdefault(f"TQ{qid}", {})
            rel[page] = max(gain, rel.get(page, 0))
    rng = random.Random(SEED)
    others = [p for p in sorted(pages) if p not in judged_pages and len(pages[p][1]) >= MEDQUAD_MIN_SECTIONS]
    keep = judged_pages | set(rng.sample(others, max(0, n_docs - len(judged_pages))))
    corpus = []
    for page in sorted(keep):
        focus, sections = pages[page]
        corpus.append({"_id": page, "title": focus, "text": "\n\n".join(f"## {q}\n\n{a}" for q, a in sections)})
    order = sorted(qrels, key=lambda q: int(q[2:]))
    queries = [{"_id": q, "text": questions[q]} for q in order]
    _write("medquad-pages", corpus, queries, {q: qrels[q] for q in order})



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=["scifact", "drcd", "cisi", "cmrc", "medquad", "medquad-pages"])
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=None, help="corpus size (scifact: 3000 docs; drcd: ~5000 sentences; cmrc: ~2000 sentences)")
    ap.add_argument("--queries", type=int, default=300, help="drcd: number of questions to sample")
    a = ap.parse_args()
    if a.name == "scifact":
        build_scifact(a.src, a.docs or 3000)
    elif a.name == "cisi":
        build_cisi(a.src)
    elif a.name == "medquad":
        build_medquad(a.src)
    elif a.name == "medquad-pages":
        build_medquad_pages(a.src, a.docs or 300)
    elif a.name == "cmrc":
        build_cmrc(a.src, a.queries, a.docs or 2000)
    else:
        build_drcd(a.src, a.queries, a.docs or 5000)


if __name__ == "__main__":
    main()
