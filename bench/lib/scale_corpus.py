"""Deterministic synthetic corpus for the scale benchmarks: files of 20 chunks of 200-400 characters.

Mixed English technical prose with part/error/version codes, Chinese paragraphs, and mixed
chunks, with Zipf-distributed vocabularies (a few hundred real technical words at the head, a
tail of ~20k pseudo-words; ~30k Chinese words over ~3,500 Zipf-weighted Han characters). File
`n` depends only on (seed, n), so the 10k-chunk corpus is the first 500 files of the 1M one and
any file can be regenerated on its own (queries, deletes, the "one more file" of an add).

`tokenized_corpus(n_chunks, cache_dir)` tokenises with `lucidrag.index.terms.tokenize_chunks` once
and caches the result as numpy arrays (vocabulary + per-chunk (term id, tf) pairs), so each
candidate index is fed the very same tokens without re-tokenising.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lucidrag.index.terms import tokenize_chunks  # noqa: E402
from lucidrag.state.records import chunk_uuid  # noqa: E402

CHUNKS_PER_FILE = 20
SEED = 12

_TECH = """pump valve bearing gasket rotor stator flange impeller shaft coupling seal housing bolt torque
pressure flow meter sensor relay breaker cable conduit panel inverter battery firmware controller
module interface protocol ethernet serial modbus gateway router switch port address configuration
parameter setting default value range limit threshold alarm warning error fault code reset restart
reboot update upgrade install uninstall download upload backup restore database server client
request response timeout retry connection network latency bandwidth throughput memory disk storage
volume partition filesystem permission user account password login authentication token certificate
encryption key signature license activation subscription invoice order shipment delivery warehouse
inventory supplier customer ticket incident escalation priority severity status report dashboard
metric log trace event message queue topic broker consumer producer cluster node replica shard index
query search result cache session cookie header payload schema field column table row record file
folder document attachment image video audio stream channel frequency voltage current resistance
capacitor transistor diode resistor circuit board connector terminal wire harness fuse enclosure
mount bracket screw washer nut spring lever gear motor drive belt chain pulley wheel axle brake
clutch transmission engine cylinder piston valve nozzle filter cartridge hose pipe fitting tank
reservoir compressor condenser evaporator thermostat heater cooler fan blower duct vent damper
calibration tolerance accuracy resolution measurement unit specification datasheet manual guide
procedure step instruction warning caution note requirement compliance standard certification test
inspection maintenance service repair replacement warranty return defect failure root cause analysis
operator technician engineer administrator manager support team vendor release version build patch
hotfix rollback migration deployment environment production staging development debug verbose
enable disable toggle option feature flag mode profile template policy rule condition action trigger
schedule interval daily weekly monthly hourly minute second millisecond timestamp date time zone
""".split()

_VERBS = """shows reports returns requires supports prevents causes triggers reduces increases measures
controls monitors replaces connects disconnects detects logs sends receives stores validates rejects
accepts overrides exceeds drops holds blocks opens closes starts stops""".split()

_UNITS = "mm cm kg bar psi rpm V A W kW Hz ms MB GB °C".split()
_PREFIXES = ("PX", "QT", "RM", "SV", "KL", "ZB", "HX", "MT", "DV", "CN", "FL", "GR", "TR", "VB", "WX",
             "AL", "BK", "CR", "DS", "EV", "PN", "SN", "LB", "MK", "NR")


def _zipf_cum(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    c = np.cumsum(w)
    return c / c[-1]


class Vocab:
    """The corpus-wide word lists (built once from the seed)."""

    def __init__(self, seed: int = SEED) -> None:
        rng = random.Random(seed)
        syll = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "er")]
        tail: set[str] = set()
        while len(tail) < 20_000:
            tail.add("".join(rng.choice(syll) for _ in range(rng.choice((2, 2, 3, 3, 4)))))
        tech = list(dict.fromkeys(_TECH))
        rng.shuffle(tech)
        self.en = tech + sorted(tail - set(tech))
        self.en_cum = _zipf_cum(len(self.en), 1.05)
        hanzi = [chr(c) for c in rng.sample(range(0x4E00, 0x9FA6), 3500)]
        han_cum = _zipf_cum(len(hanzi), 0.9).tolist()
        zh: set[str] = set()
        while len(zh) < 30_000:
            n = rng.choices((1, 2, 3, 4), cum_weights=(20, 80, 92, 100))[0]
            zh.add("".join(rng.choices(hanzi, cum_weights=han_cum, k=n)))
        self.zh = sorted(zh)
        rng.shuffle(self.zh)
        self.zh_cum = _zipf_cum(len(self.zh), 1.05)
        # part codes: 25 prefixes x 9,000 numbers; a file is "about" a few of them
        self.n_codes = len(_PREFIXES) * 9000

    @staticmethod
    def code(k: int) -> str:
        return f"{_PREFIXES[k % len(_PREFIXES)]}-{1000 + k // len(_PREFIXES)}"


_VOCAB: Vocab | None = None


def vocab() -> Vocab:
    global _VOCAB
    if _VOCAB is None:
        _VOCAB = Vocab()
    return _VOCAB


def file_id(n: int) -> str:
    return f"doc-{n:07d}"


def file_codes(n: int) -> list[str]:
    """The part codes file `n` is mostly about (queries use them)."""
    rng = np.random.default_rng([SEED, n, 1])
    v = vocab()
    return [Vocab.code(int(k)) for k in rng.integers(0, v.n_codes, 4)]


def generate_file(n: int) -> list[tuple[str, str]]:
    """File `n`: [(chunk_id, text)] of 20 chunks, 200-400 characters each."""
    v = vocab()
    rng = np.random.default_rng([SEED, n])
    fid = file_id(n)
    codes = file_codes(n)
    kind = rng.random()  # 55% English files, 30% Chinese, 15% mixed
    en = iter(np.searchsorted(v.en_cum, rng.random(4000)).tolist())
    zh = iter(np.searchsorted(v.zh_cum, rng.random(3000)).tolist())
    rnd = iter(rng.random(4000).tolist())
    ints = iter(rng.integers(0, 1000, 2000).tolist())
    en_words, zh_words = v.en, v.zh
    out = []
    for j in range(CHUNKS_PER_FILE):
        target = 200 + next(ints) % 201
        parts: list[str] = []
        size = 0
        while size < target:
            r = next(rnd)
            chinese = kind >= 0.55 and (kind < 0.85 or r < 0.5)
            if chinese:
                s = "".join(zh_words[next(zh)] for _ in range(5 + next(ints) % 9))
                if next(rnd) < 0.15:
                    s += codes[next(ints) % 4] + "的" + zh_words[next(zh)]
                s += "。"
            else:
                words = [en_words[next(en)] for _ in range(6 + next(ints) % 10)]
                words.insert(1 + next(ints) % 3, _VERBS[next(ints) % len(_VERBS)])
                x = next(rnd)
                if x < 0.25:
                    words.insert(next(ints) % len(words), codes[next(ints) % 4])
                elif x < 0.32:
                    words.append(f"ERR-{100 + next(ints) % 900}")
                elif x < 0.40:
                    words.append(f"{next(ints) % 500} {_UNITS[next(ints) % len(_UNITS)]}")
                elif x < 0.45:
                    words.append(f"v{next(ints) % 9}.{next(ints) % 20}.{next(ints) % 10}")
                s = " ".join(words).capitalize() + ". "
            parts.append(s)
            size += len(s)
        out.append((chunk_uuid(fid, j), "".join(parts)[:target].strip()))
    return out


def make_queries(n_chunks: int, count: int = 200) -> list[tuple[str, str]]:
    """(kind, query) pairs cut from files of the first `n_chunks` chunks: English words, a Chinese
    span, a part code, a code + words, an English question, a mixed question."""
    rng = random.Random(n_chunks * 31 + 7)
    v = vocab()
    n_files = n_chunks // CHUNKS_PER_FILE
    out = []
    for i in range(count):
        f = rng.randrange(n_files)
        chunks = generate_file(f)
        text = rng.choice(chunks)[1]
        kind = ("english", "chinese", "code", "code+words", "question", "mixed")[i % 6]
        ascii_words = [w.strip(".,") for w in text.split() if w.isascii() and w.strip(".,").isalpha()]
        if kind == "english" and ascii_words:
            q = " ".join(rng.sample(ascii_words, min(3, len(ascii_words))))
        elif kind == "chinese" and any(ord(c) > 0x4E00 for c in text):
            spans = [s for s in text.split("。") if len(s) >= 4 and not s.isascii()]
            s = rng.choice(spans) if spans else text
            start = rng.randrange(0, max(1, len(s) - 8))
            q = s[start : start + rng.randint(4, 10)]
        elif kind == "code":
            q = rng.choice(file_codes(f))
        elif kind == "code+words":
            q = rng.choice(file_codes(f)).replace("-", rng.choice(("-", "", " "))) + " " + " ".join(
                rng.sample(ascii_words, min(2, len(ascii_words))) if ascii_words else ["error"])
        elif kind == "question":
            q = f"how do I {rng.choice(_VERBS).rstrip('s')} the {rng.choice(v.en[:300])} {rng.choice(v.en[:2000])}"
        else:
            q = f"{rng.choice(v.en[:500])} {rng.choice(v.zh[:3000])}{rng.choice(v.zh[:3000])} {rng.choice(file_codes(f))}"
        out.append((kind, q))
    return out


class TokenizedCorpus:
    """Per-chunk (term id, tf) pairs of the first n chunks, a shared vocabulary and chunk ids."""

    def __init__(self, vocab_terms: list[str], term_ids: np.ndarray, tfs: np.ndarray,
                 offsets: np.ndarray, n_chunks: int) -> None:
        self.vocab = vocab_terms
        self.term_ids = term_ids  # uint32, per chunk its distinct terms
        self.tfs = tfs  # uint16
        self.offsets = offsets  # int64, n_chunks + 1
        self.n_chunks = n_chunks

    @property
    def n_files(self) -> int:
        return self.n_chunks // CHUNKS_PER_FILE

    def file_chunks(self, n: int) -> list[tuple[str, dict[str, int]]]:
        """File n as `tokenize_chunks` would return it (fresh dicts, shared term strings)."""
        fid = file_id(n)
        voc, ids, tfs, off = self.vocab, self.term_ids, self.tfs, self.offsets
        out = []
        for j in range(CHUNKS_PER_FILE):
            c = n * CHUNKS_PER_FILE + j
            a, b = int(off[c]), int(off[c + 1])
            out.append((chunk_uuid(fid, j), dict(zip([voc[t] for t in ids[a:b].tolist()], tfs[a:b].tolist()))))
        return out

    def df(self, term_index: list[int], skip_file: int | None = None) -> np.ndarray:
        """Exact document frequency of the given term ids over the corpus minus one file."""
        ids = self.term_ids[: self.offsets[self.n_chunks]]
        counts = np.bincount(ids, minlength=len(self.vocab))[term_index]
        if skip_file is not None:
            a = self.offsets[skip_file * CHUNKS_PER_FILE]
            b = self.offsets[(skip_file + 1) * CHUNKS_PER_FILE]
            counts = counts - np.bincount(self.term_ids[a:b], minlength=len(self.vocab))[term_index]
        return counts


def tokenized_corpus(n_chunks: int, cache_dir: Path, log=print) -> TokenizedCorpus:
    """Tokenise (once, cached) the first `n_chunks` chunks; a larger cache serves smaller sizes."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    best = None
    for p in cache_dir.glob("tokens-*"):
        if p.is_dir() and (p / "info.json").exists():
            size = int(p.name.split("-")[1])
            if size >= n_chunks and (best is None or size < best[0]):
                best = (size, p)
    if best is None:
        path = cache_dir / f"tokens-{n_chunks}"
        _build_cache(n_chunks, path, log)
        best = (n_chunks, path)
    d = best[1]
    offsets = np.array(np.load(d / "offsets.npy", mmap_mode="r")[: n_chunks + 1])
    end = int(offsets[-1])
    term_ids = np.array(np.load(d / "term_ids.npy", mmap_mode="r")[:end])
    tfs = np.array(np.load(d / "tfs.npy", mmap_mode="r")[:end])
    terms = json.loads((d / "vocab.json").read_text("utf-8"))
    del terms[int(term_ids.max()) + 1 :]
    return TokenizedCorpus(terms, term_ids, tfs, offsets, n_chunks)


def _build_cache(n_chunks: int, path: Path, log) -> None:
    term_of: dict[str, int] = {}
    ids_parts: list[np.ndarray] = []
    tf_parts: list[np.ndarray] = []
    lens = np.zeros(n_chunks, dtype=np.int64)
    t_gen = t_tok = 0.0
    n_files = n_chunks // CHUNKS_PER_FILE
    chars = 0
    for f in range(n_files):
        t0 = time.perf_counter()
        chunks = generate_file(f)
        t1 = time.perf_counter()
        tok = tokenize_chunks(chunks)
        t2 = time.perf_counter()
        t_gen += t1 - t0
        t_tok += t2 - t1
        chars += sum(len(t) for _, t in chunks)
        ids: list[int] = []
        tfs: list[int] = []
        for j, (_, tf) in enumerate(tok):
            for term, n in tf.items():
                k = term_of.get(term)
                if k is None:
                    k = term_of[term] = len(term_of)
                ids.append(k)
                tfs.append(n)
            lens[f * CHUNKS_PER_FILE + j] = len(tf)
        ids_parts.append(np.array(ids, dtype=np.uint32))
        tf_parts.append(np.minimum(np.array(tfs, dtype=np.int64), 65535).astype(np.uint16))
        if f and f % 5000 == 0:
            log(f"  corpus: {f * CHUNKS_PER_FILE:,} chunks generated+tokenised ({t_gen:.0f}+{t_tok:.0f} s)")
    offsets = np.zeros(n_chunks + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    tmp = path.with_name(path.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    np.save(tmp / "term_ids.npy", np.concatenate(ids_parts))
    np.save(tmp / "tfs.npy", np.concatenate(tf_parts))
    np.save(tmp / "offsets.npy", offsets)
    (tmp / "vocab.json").write_text(json.dumps(list(term_of), ensure_ascii=False), "utf-8")
    (tmp / "info.json").write_text(json.dumps({
        "chunks": n_chunks, "generate_s": t_gen, "tokenize_s": t_tok, "chars": chars,
        "terms": len(term_of), "postings": int(offsets[-1])}), "utf-8")
    tmp.rename(path)
    log(f"  corpus: {n_chunks:,} chunks, {chars / n_chunks:.0f} chars/chunk, {len(term_of):,} terms, "
        f"{int(offsets[-1]):,} postings; generate {t_gen:.1f} s, tokenise {t_tok:.1f} s "
        f"({n_chunks / t_tok:,.0f} chunks/s)")


def cache_info(cache_dir: Path, n_chunks: int) -> dict:
    for p in sorted(cache_dir.glob("tokens-*/info.json"), key=lambda p: int(p.parent.name.split("-")[1])):
        info = json.loads(p.read_text("utf-8"))
        if info["chunks"] >= n_chunks:
            return info
    return {}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Build the tokenised corpus cache ahead of the benchmarks.")
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "lucidrag-scale")
    a = ap.parse_args()
    tokenized_corpus(a.chunks, a.cache_dir)
