"""A trivial lexical baseline (plain-Python BM25) to gauge how hard each set is.

    python -m bench.baseline            # all available sets
    python -m bench.baseline scifact

Tokens: lower-cased Latin words/digits; each CJK run as character unigrams + bigrams.
Prints nDCG@10, Recall@100 and MRR@10. Standard library only.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter, defaultdict

from bench.lib.datasets import available_datasets, load_dataset

_LATIN = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def tokenize(text: str) -> list[str]:
    text = text.lower()
    toks = _LATIN.findall(text)
    for run in _CJK.findall(text):
        toks.extend(run)
        toks.extend(run[i : i + 2] for i in range(len(run) - 1))
    return toks


class BM25:
    def __init__(self, docs: dict[str, str], k1: float = 0.9, b: float = 0.4):
        self.k1, self.b = k1, b
        self.ids = list(docs)
        self.tf = [Counter(tokenize(docs[i])) for i in self.ids]
        self.len = [sum(c.values()) for c in self.tf]
        self.avg = sum(self.len) / max(1, len(self.len))
        df: Counter = Counter()
        self.post: dict[str, list[int]] = defaultdict(list)
        for j, c in enumerate(self.tf):
            for t in c:
                df[t] += 1
                self.post[t].append(j)
        n = len(self.ids)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def search(self, query: str, k: int = 100) -> list[tuple[str, float]]:
        scores: dict[int, float] = defaultdict(float)
        for t in set(tokenize(query)):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for j in self.post[t]:
                f = self.tf[j][t]
                scores[j] += idf * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.len[j] / self.avg))
        top = sorted(scores.items(), key=lambda x: -x[1])[:k]
        return [(self.ids[j], s) for j, s in top]


def ndcg_at_k(ranked: list[str], rels: dict[str, int], k: int = 10) -> float:
    dcg = sum((2 ** rels.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def evaluate(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    nd, rec, mrr = [], [], []
    for qid, rels in qrels.items():
        ranked = run.get(qid, [])
        nd.append(ndcg_at_k(ranked, rels))
        pos = {d for d, r in rels.items() if r > 0}
        rec.append(len(pos & set(ranked[:100])) / len(pos) if pos else 0.0)
        rr = next((1 / (i + 1) for i, d in enumerate(ranked[:10]) if d in pos), 0.0)
        mrr.append(rr)
    n = max(1, len(nd))
    return {"ndcg@10": sum(nd) / n, "recall@100": sum(rec) / n, "mrr@10": sum(mrr) / n}


def main(names: list[str]) -> None:
    for name in names or available_datasets():
        ds = load_dataset(name)
        bm = BM25({d: ds.doc_text(d, " ") for d in ds.corpus})
        run = {q: [d for d, _ in bm.search(ds.queries[q])] for q in ds.qrels}
        m = evaluate(run, ds.qrels)
        print(f"{name:10s} BM25  " + "  ".join(f"{k}={v:.3f}" for k, v in m.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
