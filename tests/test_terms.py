"""The tokeniser's edges (lucidrag/index/terms.py): which English
inflections meet and which words stay apart, codes and mixed letter/digit tokens, very long
tokens, CJK unigrams and stop characters, the share each query term carries and the heading
field. What a keyword search can match is exactly these terms."""

from __future__ import annotations

import math

import pytest

from lucidrag.index.terms import HEADING_FIELD, idf, query_terms, stem, tokenize, tokenize_chunks


@pytest.mark.parametrize("a, b", [
    ("lie", "lies"), ("tie", "ties"),  # -ies of four letters is a plural -s
    ("cries", "cried"), ("glass", "glasses"), ("fall", "falling"), ("kiss", "kissing"), ("buzz", "buzzing"),
    ("see", "seeing"), ("hop", "hopping"), ("hope", "hoping"), ("aim", "aimed"), ("valve", "valves"),
    ("study", "studies"), ("tries", "trying"), ("cried", "crying"),
])
def test_inflections_that_meet(a: str, b: str):
    assert tokenize(a) == tokenize(b) and len(tokenize(a)) == 1


# -eed is no -ed; -ed / -ing leave no stem of three letters with a vowel; -ss, -us, -is are no
# plurals; a vowel before a final y; -ied of four letters
@pytest.mark.parametrize("word", ["agreed", "shed", "bred", "used", "sing", "string", "boss", "bus", "axis", "day",
                                  "key", "tied"])
def test_words_that_are_not_inflected_forms_stay_whole(word: str):
    assert stem(word) == word


def test_stems_of_the_documented_rules():
    assert [stem(w) for w in ("studies", "classes", "valves", "studied", "stopped", "running", "creating",
                              "create", "copy", "cries", "lies", "tied", "needed", "agreed", "speed", "ceiling")] == [
        "studi", "class", "valv", "studi", "stop", "run", "creat", "creat", "copi", "cri", "lie", "tied", "need",
        "agreed", "speed", "ceil"]
    assert [stem(w) for w in ("bus", "yes", "fly", "ies")] == ["bus", "yes", "fly", "ies"]  # three letters stay


def test_mixed_letter_and_digit_tokens_yield_their_runs_up_to_three():
    assert tokenize("ipv6") == ["ipv6", "ipv", "6"]
    assert tokenize("abc123def") == ["abc123def", "abc", "123", "def"]
    assert tokenize("x1y2z3") == ["x1y2z3"]  # six runs: an identifier, kept whole only
    assert tokenize("ab12cd34") == ["ab12cd34"]
    assert tokenize("sha256") == ["sha256", "sha", "256"]
    assert tokenize("2024") == ["2024"]


def test_words_outside_ascii_are_kept_unstemmed_and_case_folded():
    assert tokenize("Café") == ["café"]
    assert tokenize("Привет мир") == ["привет", "мир"]
    assert tokenize("Straße") == tokenize("STRASSE")  # case folding turns ß into ss


def test_a_token_of_64_characters_is_a_term_and_a_longer_one_only_by_its_parts():
    assert tokenize("x" * 64) == ["x" * 64]
    assert tokenize("x" * 65) == []
    code = "a" * 60 + "-" + "b" * 10  # 71 characters: not indexed whole nor joined
    assert tokenize(code) == ["a" * 60, "b" * 10]
    short = "a" * 50 + "_" + "b" * 13  # 64 characters: whole, joined and parts
    assert tokenize(short) == [short, "a" * 50 + "b" * 13, "a" * 50, "b" * 13]


def test_stop_words_are_dropped_as_words_and_as_parts_of_codes():
    assert tokenize("the pump and the valve") == ["pump", "valv"]
    assert tokenize("e.g") == []
    assert tokenize("pump-and-valve") == ["pump-and-valve", "pumpandvalve", "pump", "valv"]
    assert tokenize("a1") == ["a1", "1"]


def test_documents_index_each_cjk_character_but_stop_characters_and_kana():
    assert tokenize("水泵的阀门") == ["水泵", "泵的", "的阀", "阀门", "水", "泵", "阀", "门"]
    assert tokenize("水泵的阀门", query=True) == ["水泵", "泵的", "的阀", "阀门"]
    assert tokenize("ひらがなカタカナ") == ["ひら", "らが", "がな", "なカ", "カタ", "タカ", "カナ", "カ", "タ", "カ", "ナ"]
    assert tokenize("了") == [] and tokenize("泵") == ["泵"]


def test_query_terms_share_one_weight_per_code_and_weigh_cjk_characters():
    terms = query_terms("ERR-503 pump")
    assert terms == {"err-503": 0.5, "err503": 0.5, "err": 0.5, "503": 0.5, "pump": 1.0}
    assert query_terms("ipv6") == pytest.approx({"ipv6": 3 ** -0.5, "ipv": 3 ** -0.5, "6": 3 ** -0.5})
    assert query_terms("水泵的阀门") == {"水泵": 1.0, "泵的": 1.0, "的阀": 1.0, "阀门": 1.0,
                                     "水": 1.0, "泵": 1.0, "阀": 1.0, "门": 1.0}
    assert query_terms("的") == {} and query_terms("泵") == {"泵": 1.0} and query_terms("") == {}


def test_a_query_term_that_repeats_keeps_its_largest_share():
    # "503" alone is a whole term; inside "ERR-503" it is one of four forms
    assert query_terms("ERR-503 503")["503"] == 1.0
    assert query_terms("503 ERR-503")["503"] == 1.0


def test_a_chunk_heading_is_indexed_once_as_its_own_field_and_not_as_body():
    ((cid, tfs),) = tokenize_chunks([("c1", "Pumps › Valve\nThe valve and the valves", "Pumps › Valve")])
    assert cid == "c1"
    assert tfs == {"valv": 2, HEADING_FIELD + "pump": 1, HEADING_FIELD + "valv": 1}
    # a text that does not start with its heading line keeps all of its text
    ((_, tfs),) = tokenize_chunks([("c2", "Valves of the pump", "Pumps")])
    assert tfs == {"valv": 1, "pump": 1, HEADING_FIELD + "pump": 1}
    ((_, tfs),) = tokenize_chunks([("c3", "Valves\nvalves")])
    assert tfs == {"valv": 2}


def test_idf_is_bm25s():
    assert idf(10, 1) == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert idf(10, 10) == pytest.approx(math.log(1 + 0.5 / 10.5))
    assert idf(10, 1) > idf(10, 2) > idf(10, 10) > 0
