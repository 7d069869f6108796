"""Everyday questions no knowledge base of an operator's files answers: the relevance cut's probes.

Embedded with a KB's own model, each probe's best cosine over the KB's chunks shows how close this
model puts unrelated questions to this KB's passages (state/probestats.py keeps those maxima;
retrieval/relevance.py compares a question's best cosine with their median). The questions are
small talk, chosen before any benchmark collection was looked at, not tuned on them (every other
one of the 24 measured in docs/BENCHMARKS.md: the median of 12 per language is as good, and all 24
ride in an upload's embedding batch); the English and the Chinese set ask the same things.

The other side of the scale is the KB's own: a file's opening sentence (`opening_question`) stands
for a question that file answers, and its best cosine over other files' chunks shows how close a
question about this KB's subject comes to a passage it does not ask about (state/openingstats.py).
"""

from __future__ import annotations

import re
from typing import Literal

Language = Literal["en", "zh"]

PROBES: dict[Language, tuple[str, ...]] = {
    "en": (
        "How long should I boil an egg for a runny yolk?",
        "Will it rain this weekend?",
        "Which is the best beach to visit in summer?",
        "What should I name my new puppy?",
        "How do I change a flat tyre on a bike?",
        "Who won the singing contest on TV last night?",
        "What are fun things to do with kids on a rainy day?",
        "Which shoes are best for running a marathon?",
        "What is the best way to learn to play the guitar?",
        "How do I make my houseplants grow faster?",
        "How do I remove rust from garden tools?",
        "What colour should I paint my living room?",
    ),
    "zh": (
        "煮溏心蛋要煮几分钟？",
        "这个周末会下雨吗？",
        "夏天去哪个海滩玩最好？",
        "给新养的小狗取什么名字好？",
        "自行车爆胎了怎么补？",
        "昨晚电视上的歌唱比赛谁赢了？",
        "下雨天带孩子在家玩什么？",
        "跑马拉松穿什么鞋最好？",
        "怎样自学弹吉他？",
        "怎样让室内植物长得更快？",
        "园艺工具生锈了怎么去除？",
        "客厅刷什么颜色的墙漆好看？",
    ),
}
LANGUAGES: tuple[Language, ...] = ("en", "zh")
ALL_PROBES: tuple[str, ...] = tuple(p for language in LANGUAGES for p in PROBES[language])

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


def language(question: str) -> Language:
    """The probes a question is compared with: Chinese when it holds at least as many Han
    characters as Latin words (a Han character is about a word), else English."""
    han = len(_HAN.findall(question))
    return "zh" if han and han >= len(_LATIN_WORD.findall(question)) else "en"


# a Latin sentence mark ends a sentence before a space; a Chinese one ends it where it stands
_SENTENCE = re.compile(r"(.{20,200}?(?:[.!?](?=\s|$)|[。！？]))")
OPENING_MAX_CHARS = 200


def opening_question(body: str) -> str:
    """What stands for a question one file answers (state/openingstats.py): the first sentence of
    its text (20 to OPENING_MAX_CHARS characters), else its first OPENING_MAX_CHARS characters."""
    text = " ".join(body.split())
    match = _SENTENCE.match(text)
    return match.group(1) if match else text[:OPENING_MAX_CHARS]
