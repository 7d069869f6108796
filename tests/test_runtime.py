"""LucidRAG under the real plugin runtime and real providers.

The test world itself (conftest.py, fakes.py) runs like `lbp run`: the SDK's bounded executor,
hooks inside `blocking_work_scope` and a bound invocation, host calls that yield and are refused
once their invocation ended. The tests below prove that world is that harsh, then that the plugin
copes: concurrent uploads, vectors that are not unit length, provider errors
that must not poison the batch size and a dropped connection to LangBot, and the size of
the vector cache.
"""

from __future__ import annotations

import asyncio
import math
import time
from array import array

import pytest
from langbot_plugin.api.entities.builtin.rag.enums import DocumentStatus
from langbot_plugin.runtime.bounded_executor import (
    BlockingWorkCapacityError,
    blocking_work_scope,
)

from lucidrag.vectors.embedding import (
    CACHE_BYTES,
    DEFAULT_BATCH_SIZE,
    BatchSize,
    VectorCache,
)
from tests.conftest import MODEL, FakePlugin, Harness
from tests.fakes import LoopStallMonitor, langbot_embedding_error
from tests.test_engine import KB, SOLAR, TEA, long_text


def distinct_text(tag: str, paragraphs: int) -> bytes:
    return long_text(paragraphs).replace(b"Machine part", f"Unit {tag} part".encode())


# ---------------------------------------------------------------- the test world is harsh


async def test_the_test_loop_refuses_a_fifth_blocking_job_per_workspace_like_lbp_run():
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wait() -> None:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()

    with blocking_work_scope("workspace-x"):
        running = [asyncio.ensure_future(asyncio.to_thread(wait)) for _ in range(4)]
        await asyncio.sleep(0)
        with pytest.raises(BlockingWorkCapacityError):
            await asyncio.to_thread(time.sleep, 0)
    release.set()
    await asyncio.gather(*running)


async def test_a_host_call_after_the_hook_returned_is_refused_like_the_sdk(harness: Harness, host):
    late: list[asyncio.Task] = []

    async def hook() -> None:
        await host.get_plugin_storage_keys()  # inside the invocation: fine

        async def background() -> None:
            await asyncio.sleep(0.01)
            await host.get_plugin_storage_keys()
        late.append(asyncio.get_running_loop().create_task(background()))

    await harness.invoke(hook)
    with pytest.raises(RuntimeError, match="Plugin invocation has ended"):
        await late[0]
    assert host.calls["get_plugin_storage_keys"] == 1 and host.refused["get_plugin_storage_keys"] == 1


async def test_the_loop_stall_monitor_sees_a_blocking_call():
    async with LoopStallMonitor(interval=0.001) as monitor:
        await asyncio.sleep(0.005)
        time.sleep(0.05)  # what a CPU-bound call on the loop does to every other task
        await asyncio.sleep(0.005)
    assert monitor.ticks > 1 and monitor.longest >= 0.04


# ---------------------------------------------------------------- concurrent uploads


async def test_eight_uploads_at_once_all_complete_under_the_bounded_executor(harness: Harness, host):
    files = [distinct_text(str(i), 480) for i in range(8)]  # ~200 KB each
    assert all(len(f) > 190_000 for f in files)
    results = await asyncio.gather(*(harness.ingest(KB, f"upload-{i}.txt", f) for i, f in enumerate(files)))
    assert [r.status for r in results] == [DocumentStatus.COMPLETED] * 8, [r.error_message for r in results]
    assert all(host.vectors_of(KB, r.document_id) for r in results)


# ---------------------------------------------------------------- vectors not unit length


@pytest.mark.parametrize("backend", ["chroma", "milvus"])
async def test_vectors_that_are_not_unit_length_score_like_unit_vectors(backend):
    def make(scale: float) -> FakePlugin:
        return FakePlugin.milvus(embed_scale=scale) if backend == "milvus" else FakePlugin(embed_scale=scale)

    scores, stored = {}, []
    for scale in (1.0, 8.0):
        harness = Harness(make(scale))
        await harness.ingest(KB, "tea.txt", TEA)
        await harness.ingest(KB, "solar.txt", SOLAR)
        response = await harness.retrieve(KB, "How many kilowatts does the solar array produce?",
                                          settings={"search_mode": "vector"})
        top = response.results[0]
        assert "42 kilowatts" in top.content[0].text
        scores[scale] = top.score
        stored += [v for v, _ in harness.host.collections[KB].values()]
    assert 0.2 < scores[1.0] < 1.0
    assert scores[8.0] == pytest.approx(scores[1.0], abs=1e-4)
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4) for v in stored)


async def test_a_threshold_keeps_the_relevant_passage_of_a_non_unit_provider():
    harness = Harness(FakePlugin(embed_scale=8.0))
    await harness.ingest(KB, "tea.txt", TEA)
    await harness.ingest(KB, "solar.txt", SOLAR)
    texts = await harness.texts(KB, "solar array kilowatts", settings={"search_mode": "vector", "score_threshold": 0.2})
    assert texts and "42 kilowatts" in texts[0]


# ---------------------------------------------------------------- provider errors


def learned(harness: Harness) -> BatchSize:
    return harness.host.engine.installation("dedicated").batch_sizes[MODEL]


async def _calls_for(harness: Harness, name: str, data: bytes) -> tuple[int, int]:
    before = harness.host.calls["invoke_embedding"]
    result = await harness.ingest(KB, name, data)
    assert result.status == DocumentStatus.COMPLETED, result.error_message
    return harness.host.calls["invoke_embedding"] - before, len(harness.host.vectors_of(KB, result.document_id))


async def test_a_503_burst_is_retried_and_leaves_the_batch_size_alone(harness: Harness, host):
    host.burst("invoke_embedding", 3, "503")  # LangBot 4.11: "Model request failed: Unknown error"
    result = await harness.ingest(KB, "a.txt", distinct_text("a", 80))
    assert result.status == DocumentStatus.COMPLETED
    calls, chunks = await _calls_for(harness, "b.txt", distinct_text("b", 80))
    assert chunks > DEFAULT_BATCH_SIZE and calls == -(-chunks // DEFAULT_BATCH_SIZE)


async def test_a_rate_limit_that_outlasts_the_retries_fails_the_file_without_blaming_its_settings(harness: Harness, host):
    host.burst("invoke_embedding", 40, "429")
    result = await harness.ingest(KB, "a.txt", distinct_text("a", 80))
    assert result.status == DocumentStatus.FAILED
    assert "Rate limit" in result.error_message and "wait" in result.error_message
    assert "API key" not in result.error_message
    assert host.vector_count(KB) == 0
    host.bursts.clear()
    calls, chunks = await _calls_for(harness, "b.txt", distinct_text("b", 80))
    assert calls == -(-chunks // DEFAULT_BATCH_SIZE)  # the burst taught nothing about batch size


@pytest.mark.parametrize("style", ["langbot", "langbot-413", "openai", "tei", "dashscope"])
async def test_batch_too_large_shrinks_to_the_providers_limit_and_stays_there(harness: Harness, host, style):
    host.max_embed_batch, host.batch_error = 10, style
    await _calls_for(harness, "a.txt", distinct_text("a", 120))
    await _calls_for(harness, "b.txt", distinct_text("b", 120))
    refused = host.oversized_batches
    # the provider names its limit (openai, tei, dashscope): one refusal; LangBot 4.11 hides it:
    # a few refusals while bisecting towards it
    assert refused == 1 if not style.startswith("langbot") else refused <= 5
    assert learned(harness).size == 10
    calls, chunks = await _calls_for(harness, "c.txt", distinct_text("c", 120))
    assert host.oversized_batches == refused and calls == -(-chunks // 10)


async def test_an_invalid_request_that_is_not_about_the_batch_does_not_shrink_it(harness: Harness, host):
    host.fail("invoke_embedding", error=langbot_embedding_error(MODEL, "Invalid request parameters"))
    result = await harness.ingest(KB, "a.txt", distinct_text("a", 80))
    assert result.status == DocumentStatus.FAILED and "Invalid request parameters" in result.error_message
    host.faults.clear()
    calls, chunks = await _calls_for(harness, "b.txt", distinct_text("b", 80))
    assert calls == -(-chunks // DEFAULT_BATCH_SIZE)


@pytest.mark.parametrize("style", ["closed", "handler-gone"])
async def test_a_dropped_connection_to_langbot_is_reported_as_langbots_not_the_models(harness: Harness, host, style):
    host.disconnect_on("invoke_embedding", nth=2, style=style)
    result = await harness.ingest(KB, "a.txt", distinct_text("a", 120))
    assert result.status == DocumentStatus.FAILED
    assert "connection to LangBot was lost" in result.error_message and "upload" in result.error_message
    assert "API key" not in result.error_message and "embedding model" not in result.error_message
    assert host.calls["invoke_embedding"] == 2  # nothing is retried against a closed connection
    host.faults.clear()
    host.reconnect()  # LangBot is back
    calls, chunks = await _calls_for(harness, "b.txt", distinct_text("b", 80))
    assert calls == -(-chunks // DEFAULT_BATCH_SIZE)


def test_batch_size_grows_back_after_successes():
    size = BatchSize(default=32, grow_after=2)
    size.too_large(32)
    size.too_large(16)
    assert size.size == 8
    for _ in range(2):
        size.succeeded(8)
    assert 8 < size.size < 16  # bisecting towards the limit it learned (15 at most)
    fresh = BatchSize(default=32, grow_after=2)
    fresh.too_large(32)
    fresh.too_large(1)  # a single text refused: it was never the batch
    assert fresh.size == 32


# ---------------------------------------------------------------- vector cache size


def test_vector_cache_stores_float32_and_is_bounded_in_bytes():
    dim = 1536
    cache = VectorCache(max_bytes=1_000_000)
    vector = array("f", [0.5] * dim)
    per_entry = VectorCache.cost(vector)
    assert per_entry < 7 * 1024  # a list[float] of 1,536 dims costs ~49 KiB
    for i in range(500):
        cache.put(("kb", MODEL, f"{i:064x}"), array("f", [float(i)] * dim))
    assert cache.nbytes <= cache.max_bytes and len(cache) == cache.max_bytes // per_entry
    assert cache.get(("kb", MODEL, f"{499:064x}")) is not None and cache.get(("kb", MODEL, f"{0:064x}")) is None
    cache.put(("other", MODEL, "x" * 64), vector)
    cache.drop_kb("kb")
    assert len(cache) == 1 and cache.nbytes == per_entry
    assert VectorCache().max_bytes == CACHE_BYTES == 64 * 2**20


async def test_embedded_vectors_are_cached_as_unit_float32(harness: Harness, host):
    await harness.ingest(KB, "tea.txt", TEA)
    cache = host.engine.installation("dedicated").cache
    assert len(cache) == 2  # its chunk and its opening sentence (the relevance cut's, index/probes.py)
    for vector in cache._entries.values():
        assert vector.typecode == "f" and math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)


# LangBot 4.11.2 summaries as the plugin receives them, in the host's UI language
# (pkg/i18n/locales/*.json of langbot 4.11.2).
SUMMARIES = {
    "en_US": ("Model request failed", "Rate limit exceeded or insufficient balance", "Unknown error",
              "Invalid request parameters", "API error", "Invalid API key"),
    "zh_Hans": ("模型请求失败", "请求过于频繁或余额不足", "未知错误", "请求参数错误", "API 错误", "API 密钥无效"),
    "zh_Hant": ("模型請求失敗", "請求過於頻繁或餘額不足", "未知錯誤", "請求參數錯誤", "API 錯誤", "API 金鑰無效"),
    "ja_JP": ("モデルへのリクエストに失敗しました", "リクエスト制限を超えたか、残高が不足しています", "不明なエラー",
              "リクエストのパラメータが無効です", "API エラー", "API キーが無効です"),
    "ru_RU": ("Ошибка запроса к модели", "Превышен лимит запросов или недостаточно средств", "Неизвестная ошибка",
              "Некорректные параметры запроса", "Ошибка API", "Недействительный API-ключ"),
    "vi_VN": ("Yêu cầu đến mô hình thất bại", "Vượt giới hạn yêu cầu hoặc số dư không đủ", "Lỗi không xác định",
              "Tham số yêu cầu không hợp lệ", "Lỗi API", "Khóa API không hợp lệ"),
}


@pytest.mark.parametrize("locale", sorted(SUMMARIES))
def test_langbot_error_summaries_are_classified_in_every_ui_language(locale):
    from lucidrag.base.host import is_transient
    from lucidrag.vectors.embedding import batch_too_large
    from tests.fakes import HostError

    failed, rate_limited, unknown, invalid, api_error, bad_key = SUMMARIES[locale]

    def error(summary: str) -> HostError:
        return HostError(f"[EmbeddingError/RequesterError] [embedding_model_uuid=5e3f0429-503a-4c1d-9e7f-"
                         f"000000000429] {failed}: {summary}")

    assert is_transient(error(rate_limited)) and is_transient(error(unknown))
    assert not is_transient(error(invalid)) and not is_transient(error(api_error))
    assert batch_too_large(error(invalid)) and batch_too_large(error(api_error))
    assert not is_transient(error(bad_key)) and not batch_too_large(error(bad_key))
