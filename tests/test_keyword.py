"""Tokeniser and BM25 index: hand-checked cases whose right answer is known by construction."""

from __future__ import annotations

import math
import zlib

import pytest

from lucidrag.index.terms import CJK_BM25_B, CJK_BM25_K1, query_terms, stem, tokenize, tokenize_chunks
from tests.reference_bm25 import (
    BM25Index,
    decode_tokenized,
    encode_tokenized,
    normalise_scores,
)

# ---------------------------------------------------------------------------------------------
# Tokeniser
# ---------------------------------------------------------------------------------------------


def test_empty_and_punctuation_only():
    assert tokenize("") == []
    assert tokenize("  ,.;!? —— 。，、 ") == []


def test_english_case_stopwords_and_plurals():
    assert tokenize("The Files are in THE folder") == ["fil", "folder"]
    assert tokenize("file") == tokenize("FILES") == tokenize("Files")
    assert tokenize("how do I configure it?") == tokenize("configuring") == ["configur"]


@pytest.mark.parametrize(
    "a, b",
    [
        ("file", "files"),
        ("box", "boxes"),
        ("class", "classes"),
        ("match", "matches"),
        ("study", "studies"),
        ("study", "studied"),
        ("study", "studying"),
        ("copy", "copies"),
        ("create", "created"),
        ("create", "creating"),
        ("create", "creates"),
        ("run", "running"),
        ("stop", "stopped"),
        ("install", "installed"),
        ("setting", "settings"),
        ("key", "keys"),
        ("need", "needed"),
        ("page", "pages"),
        ("use", "uses"),
    ],
)
def test_stemmer_conflates_inflections(a, b):
    assert stem(a) == stem(b)


@pytest.mark.parametrize("word", ["status", "analysis", "process", "bus", "string", "thing", "speed"])
def test_stemmer_leaves_non_inflections(word):
    # -us/-is/-ss are not plurals; "str"/"th"/"spe" would be no stems at all.
    assert stem(word) == word


def test_stemmer_is_idempotent_on_its_output_for_common_words():
    for w in ["files", "created", "running", "studies", "settings"]:
        assert tokenize(w) == tokenize(w.upper())


def test_codes_whole_joined_and_parts():
    assert tokenize("ERR-503") == ["err-503", "err503", "err", "503"]
    assert tokenize("ERR_503") == ["err_503", "err503", "err", "503"]
    assert tokenize("A1024") == ["a1024", "1024"]  # "a" is a stopword part
    assert tokenize("v2.3") == ["v2.3", "v2", "v", "2", "3"]
    # the forms share the joined token, so each finds the others
    assert {"err503"} <= set(tokenize("err503")) & set(tokenize("ERR-503")) & set(tokenize("Err_503"))
    assert "a1024" in tokenize("A-1024")


def test_long_hex_is_kept_whole_not_exploded():
    assert tokenize("3f2a9c1b88") == ["3f2a9c1b88"]


def test_full_width_is_normalised():
    assert tokenize("１２３４") == ["1234"]
    assert tokenize("ＥＲＲ－５０３") == tokenize("ERR-503")
    assert tokenize("ｶﾀｶﾅ", query=True) == tokenize("カタカナ", query=True)


def test_chinese_bigrams():
    text = "北京大学的图书馆"
    assert tokenize(text, query=True) == ["北京", "京大", "大学", "学的", "的图", "图书", "书馆"]
    doc = tokenize(text)
    # documents add unigrams for every character except stop characters
    assert doc[:7] == tokenize(text, query=True)
    assert sorted(doc[7:]) == sorted("北京大学图书馆")
    assert "的" not in doc


def test_single_cjk_character_run():
    assert tokenize("书") == ["书"] == tokenize("书", query=True)
    assert tokenize("的") == []
    assert tokenize("用Python写", query=True) == ["用", "python", "写"]


def test_japanese_kana():
    assert tokenize("カタカナ", query=True) == ["カタ", "タカ", "カナ"]
    assert tokenize("ひらがな", query=True) == ["ひら", "らが", "がな"]
    assert "ひ" not in tokenize("ひらがな")  # no hiragana unigrams
    assert tokenize("東京の天気", query=True) == ["东京", "京の", "の天", "天気"]  # kanji fold like Hanzi


def test_traditional_and_simplified_give_the_same_terms():
    assert tokenize("臺灣的資料庫設定") == tokenize("台湾的资料库设定")
    assert query_terms("資料庫怎麼備份？") == query_terms("资料库怎么备份？")
    assert tokenize("裏", query=True) == tokenize("裡", query=True) == tokenize("里", query=True)  # variant forms too


def test_mixed_scripts():
    toks = tokenize("LangBot插件支持Qdrant和Milvus v4.11", query=True)
    assert toks == ["langbot", "插件", "件支", "支持", "qdrant", "milvus", "v4.11", "v4", "v", "4", "11"]
    assert "langbot" in toks and "插件" in toks and "支持" in toks and "qdrant" in toks
    assert "milvus" in toks and "v4.11" in toks
    assert "和" not in toks  # a one-character stop run


def test_korean_hangul():
    assert tokenize("한국어", query=True) == ["한국", "국어"]


def test_tokenize_chunks_counts():
    assert tokenize_chunks([("c1", "files file FILE")]) == [("c1", {"fil": 3})]


# ---------------------------------------------------------------------------------------------
# BM25
# ---------------------------------------------------------------------------------------------

CORPUS = {
    "f-manual": [
        ("m1", "To reset the router, hold the reset button for ten seconds."),
        ("m2", "Error code ERR-503 means the upstream service is unavailable."),
        ("m3", "Product A1024 ships with a power adapter and a quick start guide."),
    ],
    "f-zh": [
        ("z1", "北京大学的图书馆藏书丰富，开放时间为早上八点。"),
        ("z2", "上海的天气今天很好，适合出门散步。"),
    ],
    "f-misc": [
        ("x1", "The router firmware update improves the wireless range."),
        ("x2", "Product A1025 and product A1026 are the older models of the router."),
        ("x3", "Bananas are yellow. The zebra is striped."),
    ],
}


def build(files=CORPUS) -> BM25Index:
    idx = BM25Index()
    for fid, chunks in files.items():
        idx.add(fid, chunks)
    return idx


def ids(results):
    return [cid for cid, _ in results]


def test_exact_product_code_ranks_first():
    idx = build()
    res = idx.search("A1024", 5)
    assert ids(res)[0] == "m3"
    assert ids(idx.search("what does ERR-503 mean", 5))[0] == "m2"
    assert ids(idx.search("err503", 5))[0] == "m2"


def test_chinese_short_term_finds_chinese_chunk():
    idx = build()
    assert ids(idx.search("图书馆", 3))[0] == "z1"
    assert ids(idx.search("天气", 3)) == ["z2"]
    assert ids(idx.search("书", 3)) == ["z1"]  # one character inside a longer run


def test_rare_term_beats_common_term():
    idx = build()
    # "router" is in three chunks, "zebra" in one: the chunk with only the rare term outranks
    # every chunk with only the common one
    res = idx.search("router zebra", 5)
    assert ids(res)[0] == "x3"
    assert set(ids(res)) == {"x3", "m1", "x1", "x2"}
    # and a chunk holding both beats chunks holding either
    assert ids(idx.search("router firmware", 5))[0] == "x1"


def test_scores_positive_sorted_and_topk():
    idx = build()
    res = idx.search("router product", 2)
    assert len(res) == 2
    assert all(s > 0 for _, s in res)
    assert res[0][1] >= res[1][1]
    assert idx.search("nothing-matches-this", 5) == []
    assert idx.search("", 5) == []
    assert idx.search("the and of", 5) == []
    assert idx.search("router", 0) == []


def test_bm25_score_by_hand():
    idx = BM25Index()
    idx.add("f", [("c1", "apple banana"), ("c2", "banana cherry cherry date")])
    # N=2, avgdl=3; "cherry": df=1 → idf=ln(1+1.5/1.5)=ln 2; tf=2, dl=4
    k1, b = 1.2, 0.75
    expected = math.log(2) * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 4 / 3))
    [(cid, score)] = idx.search("cherry", 5)
    assert cid == "c2"
    assert score == pytest.approx(expected)


def test_len_and_file_ids():
    idx = build()
    assert len(idx) == 8
    assert idx.file_ids() == {"f-manual", "f-zh", "f-misc"}
    assert "f-zh" in idx and "nope" not in idx


def test_file_ids_filter():
    idx = build()
    assert set(ids(idx.search("router", 5, file_ids={"f-misc"}))) == {"x1", "x2"}
    assert idx.search("router", 5, file_ids={"unknown"}) == []
    assert idx.search("router", 5, file_ids=set()) == []
    # the filter restricts results but does not change a chunk's score
    full = dict(idx.search("router", 5))
    for cid, s in idx.search("router", 5, file_ids={"f-misc"}):
        assert s == pytest.approx(full[cid])


def _assert_same_results(a: BM25Index, b: BM25Index, queries):
    for q in queries:
        ra, rb = a.search(q, 10), b.search(q, 10)
        assert ids(ra) == ids(rb), q
        for (_, sa), (_, sb) in zip(ra, rb):
            assert sa == pytest.approx(sb, rel=1e-12), q


QUERIES = ["router", "A1024", "ERR-503", "product router", "图书馆", "天气 散步", "书", "banana zebra"]


def test_remove_really_removes_and_stats_match_fresh_index():
    idx = build()
    assert idx.remove("f-misc") is True
    assert idx.remove("f-misc") is False
    assert len(idx) == 5
    assert idx.file_ids() == {"f-manual", "f-zh"}
    for q in QUERIES:
        assert not {"x1", "x2", "x3"} & set(ids(idx.search(q, 10)))
    fresh = build({k: v for k, v in CORPUS.items() if k != "f-misc"})
    _assert_same_results(idx, fresh, QUERIES)
    assert idx.stats()["avgdl"] == pytest.approx(fresh.stats()["avgdl"])
    assert idx.stats()["postings"] == fresh.stats()["postings"]
    assert idx.stats()["terms"] == fresh.stats()["terms"]
    # and after compaction (slot renumbering) too
    assert idx.stats()["dead_slots"] == 3
    idx.compact()
    assert idx.stats()["dead_slots"] == 0
    _assert_same_results(idx, fresh, QUERIES)


def test_readd_replaces_not_duplicates():
    idx = build()
    idx.add("f-manual", [("m9", "A brand new manual about the A1024 charger.")])
    assert len(idx) == 6
    res = ids(idx.search("A1024", 10))
    assert res[0] == "m9" and "m3" not in res
    assert idx.search("reset button", 10) == []
    fresh = build({**CORPUS, "f-manual": [("m9", "A brand new manual about the A1024 charger.")]})
    _assert_same_results(idx, fresh, QUERIES + ["charger", "reset"])


def test_remove_everything_and_reuse():
    idx = build()
    for f in list(idx.file_ids()):
        idx.remove(f)
    assert len(idx) == 0 and idx.search("router", 5) == []
    idx.add("again", [("a1", "router again")])
    assert ids(idx.search("router", 5)) == ["a1"]


@pytest.mark.parametrize("min_dead", [0, 65_536])
def test_churn_compacts_and_keeps_results(monkeypatch, min_dead):
    monkeypatch.setattr("tests.reference_bm25._RENUMBER_MIN_DEAD", min_dead)
    idx = BM25Index()
    docs = {f"f{i}": [(f"f{i}-c{j}", f"word{i} common term{j} 图书{i}") for j in range(50)]
            for i in range(40)}
    for _ in range(5):  # re-ingest everything repeatedly
        for fid, chunks in docs.items():
            idx.add(fid, chunks)
    assert len(idx) == 2000
    st = idx.stats()
    assert st["dead_slots"] <= max(min_dead, 2 * st["chunks"])  # memory stays bounded
    assert st["postings"] == sum(len(set(tokenize(t))) for c in docs.values() for _, t in c)
    fresh = build(docs)
    _assert_same_results(idx, fresh, ["common", "word3 term7", "图书", "term49"])
    idx.compact()
    _assert_same_results(idx, fresh, ["common", "word3 term7", "图书", "term49"])
    assert idx.stats()["postings"] == fresh.stats()["postings"]


def test_chunk_with_no_tokens_counts_but_never_matches():
    idx = BM25Index()
    idx.add("f", [("empty", "。。。"), ("c", "router")])
    assert len(idx) == 2
    assert ids(idx.search("router", 5)) == ["c"]


def test_tf_above_cap_is_saturated_not_wrapped():
    idx = BM25Index()
    idx.add("f", [("big", "spam " * 300), ("small", "spam eggs")])
    res = dict(idx.search("spam", 5))
    assert res["big"] > 0 and res["small"] > 0


# ---------------------------------------------------------------------------------------------
# Serialisation
# ---------------------------------------------------------------------------------------------


def test_index_round_trip_identical_results():
    idx = build()
    idx.remove("f-zh")
    idx.add("f-zh", CORPUS["f-zh"])
    blob = idx.to_bytes()
    again = BM25Index.from_bytes(blob)
    assert len(again) == len(idx)
    assert again.file_ids() == idx.file_ids()
    for q in QUERIES:
        assert again.search(q, 10) == idx.search(q, 10)
        assert again.search(q, 10, file_ids={"f-zh"}) == idx.search(q, 10, file_ids={"f-zh"})
    # a loaded index stays mutable
    again.remove("f-manual")
    assert "m3" not in ids(again.search("A1024", 5))
    again.add("new", [("n1", "A1024 again")])
    assert ids(again.search("A1024", 5))[0] == "n1"
    assert BM25Index.from_bytes(BM25Index().to_bytes()).search("x", 5) == []


def test_per_file_blobs_rebuild_without_retokenising():
    blobs = {fid: encode_tokenized(tokenize_chunks(chunks)) for fid, chunks in CORPUS.items()}
    rebuilt = BM25Index()
    for fid, blob in blobs.items():
        rebuilt.add_tokenized(fid, decode_tokenized(blob))
    _assert_same_results(rebuilt, build(), QUERIES)
    assert decode_tokenized(blobs["f-zh"]) == tokenize_chunks(CORPUS["f-zh"])


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"garbage",
        b"LRBM",
        b"LRBM\x01not zlib at all",
        b"LRBM\x09" + zlib.compress(b"{}"),
        b"LRBM\x01" + zlib.compress(b"\x05\x00\x00\x00{}"),
        b"LRBM\x01" + zlib.compress(b"\x02\x00\x00\x00[]"),
        b"LRKT\x01" + zlib.compress(b"[]"),
    ],
)
def test_from_bytes_garbage_raises_value_error(blob):
    with pytest.raises(ValueError):
        BM25Index.from_bytes(blob)


def test_from_bytes_truncated_or_tampered_raises_value_error():
    blob = build().to_bytes()
    with pytest.raises(ValueError):
        BM25Index.from_bytes(blob[: len(blob) // 2])
    body = bytearray(zlib.decompress(blob[5:]))
    body[-1] ^= 0xFF  # a posting now points at a slot that does not exist
    with pytest.raises(ValueError, match="corrupt keyword index"):
        BM25Index.from_bytes(blob[:5] + zlib.compress(bytes(body)))
    with pytest.raises(ValueError):
        BM25Index.from_bytes("not bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "blob",
    [b"", b"LRKT\x01xx", b"LRBM\x01" + zlib.compress(b"[]"),
     b"LRKT\x01" + zlib.compress(b'[["c", {"t": 0}]]'),
     b"LRKT\x01" + zlib.compress(b'{"a": 1}')],
)
def test_decode_tokenized_garbage_raises_value_error(blob):
    with pytest.raises(ValueError):
        decode_tokenized(blob)


def test_normalise_scores():
    assert normalise_scores([]) == []
    assert normalise_scores([("a", 4.0), ("b", 1.0)]) == [("a", 1.0), ("b", 0.25)]


def test_very_long_query_keeps_its_rarest_terms():
    idx = build()
    unknown = " ".join(f"word{i}" for i in range(200))  # terms not in the index are dropped
    assert ids(idx.search(unknown + " zebra", 5)) == ["x3"]
    many = " ".join(f"qq{chr(97 + i // 26)}{chr(97 + i % 26)}k" for i in range(47))
    many += " router product zebra"
    assert len(set(tokenize(many, query=True))) == 50
    idx.add("long", [("L", many)])
    # 50 indexed terms: the rarest 48 are kept; router (df 4) and product (df 3) go, zebra stays
    res = ids(idx.search(many, 10))
    assert res[0] == "L" and "x3" in res and "m1" not in res


def _brute_force(docs: list[tuple[str, dict[str, int]]], query: str, k1=1.2, b=0.75):
    """Textbook BM25 over every chunk, for checking the pruned search (CJK terms with CJK_BM25_K1/_B)."""
    n = len(docs)

    def length(tfs):  # single CJK characters do not count towards a chunk's length
        return sum(tf for t, tf in tfs.items() if len(t) > 1 or t.isascii())

    avgdl = sum(length(tf) for _, tf in docs) / n
    out = {}
    for term, share in query_terms(query).items():  # the forms of one code share one weight
        df = sum(1 for _, tf in docs if term in tf)
        if not df:
            continue
        idf = share * math.log(1 + (n - df + 0.5) / (df + 0.5))
        tk1, tb = (k1, b) if term.isascii() else (CJK_BM25_K1, CJK_BM25_B)
        for cid, tfs in docs:
            if term in tfs:
                tf, dl = min(tfs[term], 255), length(tfs)
                out[cid] = out.get(cid, 0.0) + idf * tf * (tk1 + 1) / (tf + tk1 * (1 - tb + tb * dl / avgdl))
    return out


def test_pruned_search_equals_brute_force_bm25():
    import random

    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(300)] + list("天地玄黄宇宙洪荒日月盈昃辰宿列张")
    weights = [1 / (i + 1) for i in range(len(vocab))]
    chunks = []
    for i in range(600):
        words = rng.choices(vocab, weights, k=rng.randint(3, 40))
        chunks.append((f"c{i}", " ".join(w if w.isascii() else w + w for w in words)))
    idx = BM25Index()
    for f in range(0, 600, 25):
        idx.add(f"f{f}", chunks[f : f + 25])
    idx.remove("f100")
    idx.add("f100", chunks[100:125])  # slots now out of file order
    docs = tokenize_chunks(chunks)
    for _ in range(60):
        q = " ".join(rng.choices(vocab, weights, k=rng.randint(1, 6)))
        want = _brute_force(docs, q)
        for k in (1, 5, 20):
            got = idx.search(q, k)
            expected = sorted(want.values(), reverse=True)[:k]
            assert [s for _, s in got] == pytest.approx(expected, rel=1e-9), q
            for cid, s in got:
                assert s == pytest.approx(want[cid], rel=1e-9)


def test_doc_unigrams_do_not_change_ranking_of_bigram_queries(monkeypatch):
    monkeypatch.setattr("lucidrag.index.terms.QUERY_CJK_UNIGRAM_WEIGHT", 0.0)  # bigram-only queries
    with_uni = build()
    monkeypatch.setattr("lucidrag.index.terms._DOC_CJK_UNIGRAMS", False)
    without = build()
    _assert_same_results(with_uni, without, ["图书馆", "天气 散步", "北京大学", "router 上海"])
    assert without.search("书", 3) == []  # what the unigrams are for
    assert ids(with_uni.search("书", 3)) == ["z1"]


def test_a_question_sharing_single_characters_with_the_answer_finds_it_first():
    # 首府 (seat of government) vs 首都 (capital) and 政府 (government): only the characters 首
    # and 府 are shared; bigrams alone rank sentences that merely name Scotland/England first
    idx = BM25Index()
    idx.add("f", [("answer", "愛丁堡是蘇格蘭首都，政府機構大多設在城中。"), ("pipes", "蘇格蘭風笛。"),
                  ("england", "英格蘭的人口約五千萬。"), ("london", "倫敦是英國最大的城市。"),
                  ("wales", "威爾斯以山地為主。"), ("ireland", "北愛爾蘭與愛爾蘭接壤。")])
    assert ids(idx.search("蘇格蘭的首府在哪裡？", 3))[0] == "answer"
