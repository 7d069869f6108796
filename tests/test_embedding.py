"""The Embedder on its own, against the fake host: which batches reach the provider, what the
vectors look like, what the cache keys on, and which errors are retried, shrink the batch or fail
the file."""

from __future__ import annotations

import math
from array import array

import numpy as np
import pytest

from lucidrag.base.errors import EmbeddingFailure, HostConnectionLost
from lucidrag.vectors.embedding import (
    DEFAULT_BATCH_SIZE,
    BatchSize,
    Embedder,
    VectorCache,
    stated_limit,
)
from tests.fakes import FakeHost, HostError, hash_embed, langbot_embedding_error

MODEL = "model-a"


class RecordingHost(FakeHost):
    """The fake host, remembering how many texts each embedding call carried."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.batches: list[int] = []

    async def invoke_embedding(self, embedding_model_uuid: str, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return await super().invoke_embedding(embedding_model_uuid, texts)


def texts(n: int, tag: str = "t") -> list[str]:
    return [f"{tag} passage number {i} about pumps" for i in range(n)]


def embedder(host: FakeHost, cache: VectorCache | None = None) -> Embedder:
    return Embedder(host, VectorCache() if cache is None else cache, {})


def norms(matrix: np.ndarray) -> list[float]:
    return [float(np.linalg.norm(row)) for row in matrix]


async def test_texts_go_to_the_provider_in_default_sized_batches_in_order():
    host = RecordingHost()
    emb = embedder(host)
    out = await emb.embed("kb", MODEL, texts(70))
    assert host.batches == [DEFAULT_BATCH_SIZE, DEFAULT_BATCH_SIZE, 70 - 2 * DEFAULT_BATCH_SIZE]
    assert emb.calls == 3 and out.shape == (70, len(hash_embed("x"))) and out.dtype == np.float32
    expected = [np.asarray(hash_embed(t)) / np.linalg.norm(hash_embed(t)) for t in texts(70)]
    assert np.allclose(out, np.asarray(expected), atol=1e-6)  # row i is text i


async def test_vectors_of_a_long_vector_provider_come_back_unit_length():
    host = FakeHost(embed_scale=8.0)
    emb = embedder(host)
    out = await emb.embed("kb", MODEL, texts(5))
    assert all(math.isclose(n, 1.0, rel_tol=1e-5) for n in norms(out))
    query = await emb.embed_query(MODEL, "pumps")
    assert isinstance(query, list) and math.isclose(math.hypot(*query), 1.0, rel_tol=1e-5)


async def test_a_zero_vector_stays_zero_instead_of_failing():
    host = FakeHost(embed=lambda t: [0.0, 0.0, 0.0] if t == "blank" else [3.0, 4.0, 0.0])
    out = await embedder(host).embed("kb", MODEL, ["blank", "x"])
    assert out[0].tolist() == [0.0, 0.0, 0.0]
    assert np.allclose(out[1], [0.6, 0.8, 0.0])


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [1.0, float("inf")]])
async def test_an_empty_or_non_finite_vector_fails_the_file_permanently(bad):
    host = FakeHost(embed=lambda t: bad if t == "bad" else [1.0, 0.0])
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(host).embed("kb", MODEL, ["ok", "bad"])
    assert raised.value.permanent and "empty or invalid vector" in str(raised.value)


async def test_vectors_of_different_sizes_fail_the_file_permanently():
    host = FakeHost(embed=lambda t: [1.0, 0.0, 0.0] if t == "a" else [1.0, 0.0])
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(host).embed("kb", MODEL, ["a", "b"])
    assert raised.value.permanent and "[2, 3]" in str(raised.value)


async def test_a_provider_returning_too_few_vectors_fails_the_file_permanently():
    class ShortHost(FakeHost):
        async def invoke_embedding(self, embedding_model_uuid, texts):
            return (await super().invoke_embedding(embedding_model_uuid, texts))[:-1]

    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(ShortHost()).embed("kb", MODEL, texts(3))
    assert raised.value.permanent and "returned 2 vectors for 3 texts" in str(raised.value)


@pytest.mark.parametrize(("own", "said"), [
    (3, "returned 2 vectors for 3 texts"),  # one batch: the caller's 3 texts and 24 riding along
    (40, "returned 7 vectors for 8 texts"),  # the second batch: 8 of the caller's and 24 riding
    (32, "returned 23 vectors for 24 texts"),  # a batch of riding texts only: counted as they are
])
async def test_too_few_vectors_are_counted_against_the_callers_texts_only(own, said):
    class ShortWithProbes(FakeHost):  # one vector short in a batch holding the riding texts
        async def invoke_embedding(self, embedding_model_uuid, texts):
            vectors = await super().invoke_embedding(embedding_model_uuid, texts)
            return vectors[:-1] if any(t.startswith("probe") for t in texts) else vectors

    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(ShortWithProbes()).embed("kb", MODEL, texts(own), texts(24, "probe"))
    assert said in str(raised.value)


async def test_the_cache_is_keyed_by_kb_model_and_text():
    host = RecordingHost()
    cache = VectorCache()
    emb = embedder(host, cache)
    first = await emb.embed("kb", MODEL, ["alpha", "beta", "alpha"])  # a repeated text is sent once
    assert host.batches == [2] and np.array_equal(first[0], first[2])
    again = await emb.embed("kb", MODEL, ["beta", "alpha"])
    assert host.batches == [2] and np.array_equal(again[1], first[0])  # all from the cache
    await emb.embed("kb", "model-b", ["alpha"])  # another model: its own vectors
    await emb.embed("kb2", MODEL, ["alpha"])  # another KB: dropping one KB never drops the other's
    await emb.embed("kb", MODEL, ["alpha", "gamma"])  # only the new text is sent
    assert host.batches == [2, 1, 1, 1]
    cache.drop_kb("kb")
    await emb.embed("kb2", MODEL, ["alpha"])
    assert host.batches == [2, 1, 1, 1]
    await emb.embed("kb", MODEL, ["alpha"])
    assert host.batches == [2, 1, 1, 1, 1]


def test_the_cache_evicts_the_least_recently_used_and_counts_replacements_once():
    one = array("f", [1.0] * 8)
    cache = VectorCache(max_bytes=2 * VectorCache.cost(one))
    cache.put(("kb", MODEL, "a"), one)
    cache.put(("kb", MODEL, "a"), one)  # replacing a vector does not count it twice
    assert cache.nbytes == VectorCache.cost(one) and len(cache) == 1
    cache.put(("kb", MODEL, "b"), one)
    assert cache.get(("kb", MODEL, "a")) is one  # "a" is now the most recently used
    cache.put(("kb", MODEL, "c"), one)
    assert cache.get(("kb", MODEL, "b")) is None and cache.get(("kb", MODEL, "a")) is one
    assert cache.nbytes == 2 * VectorCache.cost(one)


async def test_a_provider_limit_it_names_is_adopted_at_once_and_kept():
    host = RecordingHost()
    host.max_embed_batch, host.batch_error = 10, "tei"
    emb = embedder(host)
    await emb.embed("kb", MODEL, texts(45))
    assert host.batches == [32, 10, 10, 10, 10, 5]
    await emb.embed("kb", MODEL, texts(40, "u"))
    assert host.batches[6:] == [10, 10, 10, 10] and emb.batch_sizes[MODEL].size == 10


async def test_a_hidden_limit_is_found_by_halving_and_only_believed_once_a_smaller_batch_works():
    host = RecordingHost()
    host.max_embed_batch, host.batch_error = 10, "langbot"  # LangBot 4.11 drops the number
    emb = embedder(host)
    await emb.embed("kb", MODEL, texts(40))
    assert host.batches[:3] == [32, 16, 8]
    size = emb.batch_sizes[MODEL]
    assert size.ceiling == 15 and sum(b for b in host.batches if b <= 10) == 40


async def test_a_single_text_refused_as_too_large_fails_with_the_providers_reason():
    host = RecordingHost()
    host.max_embed_batch, host.batch_error = 0, "openai"
    emb = embedder(host)
    with pytest.raises(EmbeddingFailure) as raised:
        await emb.embed("kb", MODEL, texts(3))
    assert host.batches == [3, 1] and "Error code: 400" in str(raised.value)
    assert emb.batch_sizes[MODEL].size == DEFAULT_BATCH_SIZE  # nothing learned from it
    with pytest.raises(EmbeddingFailure):
        await emb.embed_query(MODEL, "pumps")


async def test_transient_errors_are_retried_without_shrinking_and_then_blamed_on_the_provider():
    host = RecordingHost()
    host.burst("invoke_embedding", 2, "503")
    emb = embedder(host)
    await emb.embed("kb", MODEL, texts(40))
    assert host.batches == [32, 32, 32, 8] and emb.calls == 2  # two retries inside one call
    host.burst("invoke_embedding", 40, "429")
    with pytest.raises(EmbeddingFailure) as raised:
        await emb.embed("kb", MODEL, texts(3, "v"))
    assert "wait a little" in str(raised.value) and "API key" not in str(raised.value)
    assert not raised.value.permanent


async def test_a_settings_error_is_not_retried_and_names_the_settings():
    host = RecordingHost()
    host.fail("invoke_embedding", error=langbot_embedding_error(MODEL, "Invalid API key"))
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(host).embed("kb", MODEL, texts(3))
    assert host.batches == [3] and "API key" in str(raised.value) and "Invalid API key" in str(raised.value)


async def test_a_lost_connection_is_not_reported_as_the_models_failure():
    host = RecordingHost()
    host.disconnect()
    with pytest.raises(HostConnectionLost):
        await embedder(host).embed("kb", MODEL, texts(3))
    with pytest.raises(HostConnectionLost):
        await embedder(host).embed_query(MODEL, "x")


async def test_nothing_to_embed_makes_no_call():
    host = RecordingHost()
    out = await embedder(host).embed("kb", MODEL, [])
    assert host.batches == [] and out.shape == (0, 0) and out.dtype == np.float32


@pytest.mark.parametrize("message, limit", [
    ("batch size 64 > maximum allowed batch size 32", 32),
    ("'input' should not be larger than 10", 10),
    ("at most 25 inputs per request", 25),
    ("Invalid request parameters", None),
])
def test_the_limit_a_provider_names_is_read_from_its_message(message, limit):
    assert stated_limit(HostError(message)) == limit


def test_batch_size_grows_by_doubling_up_to_the_default_after_a_streak_of_full_batches():
    size = BatchSize(default=32, grow_after=2)
    assert size.too_large(32, stated=None) and size.size == 16
    size.succeeded(16)  # confirms the limit: below 32
    assert size.ceiling == 31
    size.succeeded(5)  # a short last batch says nothing
    assert size.size == 16
    size.succeeded(16)
    assert size.size == 24  # bisecting towards 31, not doubling to 32
    named = BatchSize(default=32, grow_after=2)
    named.too_large(32, stated=8)
    assert named.size == named.ceiling == 8
    for _ in range(4):
        named.succeeded(8)
    assert named.size == 8  # a named limit is never exceeded
    unknown = BatchSize(default=32, grow_after=3)
    unknown.size = 4  # e.g. halved by a refusal later disproved
    for _ in range(3):
        unknown.succeeded(4)
    assert unknown.size == 8
    for _ in range(2):
        unknown.succeeded(8)
    assert unknown.size == 8  # the streak restarts after growing
    unknown.succeeded(8)
    assert unknown.size == 16


def test_batch_size_edge_cases_of_a_refusal():
    two = BatchSize(default=32)
    assert two.too_large(2) and two.size == 1  # two texts refused: one may still pass
    for stated, expected in [(1, 1), (0, 16), (32, 16)]:  # 0 or the refused size itself: not a limit
        named = BatchSize(default=32)
        named.too_large(32, stated=stated)
        assert named.size == expected
    lowered = BatchSize(default=32)
    lowered.succeeded(32)
    lowered.too_large(32)  # 32 worked before: retry just below it, not at half
    assert lowered.size == 31
    racing = BatchSize(default=32)
    racing.too_large(32)
    racing.succeeded(32)  # a batch of 32 sent before the refusal succeeded: 32 is not too large
    assert racing.ceiling == 32
    slow = BatchSize(default=32, grow_after=3)
    slow.size = 16
    slow.succeeded(16)
    slow.succeeded(16)
    assert slow.size == 16  # not before the third full batch
    slow.succeeded(16)
    assert slow.size == 32  # no limit known: doubling back to the default, not bisecting
    odd = BatchSize(default=30, grow_after=1)
    odd.too_large(30)
    odd.succeeded(15)  # limit 29: bisect 15..29
    assert odd.ceiling == 29 and odd.size == 22


async def test_every_call_names_the_model_it_was_asked_for():
    class ModelHost(FakeHost):
        models: list[str] = []

        async def invoke_embedding(self, embedding_model_uuid, texts):
            self.models.append(embedding_model_uuid)
            return await super().invoke_embedding(embedding_model_uuid, texts)

    host = ModelHost()
    emb = embedder(host)
    await emb.embed("kb", MODEL, texts(3))
    await emb.embed_query("model-b", "pumps")
    assert host.models == [MODEL, "model-b"]


async def test_a_non_list_answer_fails_the_file_with_a_reason():
    class NoneHost(FakeHost):
        async def invoke_embedding(self, embedding_model_uuid, texts):
            return {}

    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(NoneHost()).embed("kb", MODEL, texts(2))
    assert str(raised.value) == ("The embedding model returned dict vectors for 2 texts. The model or its "
                                 "provider is misbehaving; try another embedding model.")


async def test_the_messages_users_see_for_each_kind_of_failure():
    bad = FakeHost(embed=lambda t: [float("nan")])
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(bad).embed("kb", MODEL, ["x"])
    assert str(raised.value) == ("The embedding model returned an empty or invalid vector. Check the model's "
                                 "settings, or choose another embedding model.")
    mixed = FakeHost(embed=lambda t: [1.0] * len(t))
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(mixed).embed("kb", MODEL, ["ab", "abc"])
    assert str(raised.value) == ("The embedding model returned vectors of different sizes ([2, 3]). "
                                 "Choose another embedding model.")
    key = langbot_embedding_error(MODEL, "Invalid API key")
    host = FakeHost()
    host.fail("invoke_embedding", error=key)
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(host).embed("kb", MODEL, ["x"])
    assert str(raised.value) == (f"The embedding model failed: {key}. Check the embedding model's settings "
                                 "(API key, base URL, model name) under Models, then upload the file again.")
    busy = FakeHost()
    busy.burst("invoke_embedding", 40, "429")
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(busy).embed_query(MODEL, "x")
    assert str(raised.value).endswith(". The provider is overloaded, rate-limited or unreachable; wait a little "
                                      "and upload the file again (or raise the provider's rate limit).")
    assert "Rate limit" in str(raised.value)
    tight = FakeHost()
    tight.max_embed_batch, tight.batch_error = 0, "openai"
    with pytest.raises(EmbeddingFailure) as raised:
        await embedder(tight).embed_query(MODEL, "x")
    assert "Error code: 400" in str(raised.value)


def test_dropping_a_kb_from_the_cache_frees_only_its_bytes():
    small, large = array("f", [1.0] * 8), array("f", [1.0] * 64)
    cache = VectorCache()
    cache.put(("a", MODEL, "1"), small)
    cache.put(("b", MODEL, "2"), large)
    cache.put(("a", MODEL, "3"), small)
    cache.drop_kb("a")
    assert len(cache) == 1 and cache.nbytes == VectorCache.cost(large)
