"""The benchmark's embedding cache: runs that share it on one machine share the work."""

from __future__ import annotations

from bench.lib.cache import CachedEmbedder, EmbeddingCache


class CountingEmbedder:
    name = "counting"
    dimension = 2

    def __init__(self, before_call=None) -> None:
        self.embedded: list[str] = []
        self.before_call = before_call

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.before_call:
            self.before_call()
        self.embedded += texts
        return [[float(len(t)), 1.0] for t in texts]

    embed_queries = embed_documents


def test_texts_another_run_embedded_meanwhile_are_not_embedded_again(tmp_path):
    path = tmp_path / "emb.sqlite"
    texts = [f"text {i}" for i in range(6)]
    other = CachedEmbedder(CountingEmbedder(), EmbeddingCache(path))

    def other_run_catches_up() -> None:  # while this run embeds its first chunk, the other embeds the rest
        if not other.inner.embedded:
            other.embed_documents(texts[2:])

    inner = CountingEmbedder(before_call=other_run_catches_up)
    mine = CachedEmbedder(inner, EmbeddingCache(path))
    mine.chunk = 2
    vectors = mine.embed_documents(texts)
    assert inner.embedded == texts[:2]
    assert vectors == [[float(len(t)), 1.0] for t in texts]
    assert (mine.hits, mine.misses) == (4, 2)
