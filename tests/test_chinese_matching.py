"""Chinese questions meet their answer whichever script, Traditional or Simplified, each is
written in: through the real component, tokeniser and keyword index on the fake host."""

from __future__ import annotations

import pytest

from lucidrag.index import segindex, terms
from lucidrag.state.storage_keys import kb_prefix
from tests.conftest import Harness
from tests.test_state_runtime import restarted

KB = "kb-main"

SIMPLIFIED = {
    "backup.txt": "数据库每天凌晨三点自动备份，备份档案保留三十天。",
    "chat.txt": "每个聊天群组最多保留多少天的记录，由管理员设定。",
    "proxy.txt": "网络设定页面可以修改代理服务器的地址和端口。",
}
TRADITIONAL = {
    "backup.txt": "資料庫每天凌晨三點自動備份，備份檔案保留三十天。",
    "chat.txt": "每個聊天群組最多保留多少天的記錄，由管理員設定。",
    "proxy.txt": "網路設定頁面可以修改代理伺服器的位址和連接埠。",
}


async def ingest_all(h: Harness, files: dict[str, str]) -> None:
    for name, text in files.items():
        await h.ingest(KB, name, text.encode())


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_a_traditional_question_finds_the_simplified_sentence_that_answers_it(harness: Harness, mode: str):
    await ingest_all(harness, SIMPLIFIED)

    texts = await harness.texts(KB, "數據庫的備份檔案保留多少天？", settings={"search_mode": mode, "top_k": 3})

    assert "数据库每天凌晨三点自动备份" in texts[0]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
async def test_a_simplified_question_finds_the_traditional_sentence_that_answers_it(harness: Harness, mode: str):
    await ingest_all(harness, TRADITIONAL)

    texts = await harness.texts(KB, "资料库的备份档案保留多少天？", settings={"search_mode": mode, "top_k": 3})

    assert "資料庫每天凌晨三點自動備份" in texts[0]


@pytest.mark.usefixtures("persist_every_segment")
async def test_an_index_stored_by_the_earlier_tokeniser_is_built_again_after_an_upgrade(harness: Harness, host,
                                                                                       monkeypatch):
    with monkeypatch.context() as earlier_release:  # no folding, manifests without a tokeniser version
        earlier_release.setattr(terms, "FOLD", {})
        earlier_release.setattr(segindex, "TERMS_VERSION", 1)
        await ingest_all(harness, TRADITIONAL)
    back = restarted(host)

    texts = await back.texts(KB, "资料库的备份档案保留多少天？", settings={"search_mode": "keyword", "top_k": 1})

    assert "資料庫每天凌晨三點自動備份" in texts[0]
    await back.ingest(KB, "more.txt", "另一份文件。".encode())  # the next write of the index
    prefix = kb_prefix(KB) + "kw/"
    named = segindex.SegmentIndex.manifest_segment_names(host.storage[prefix + "manifest"])  # of this tokeniser
    assert sorted(k.removeprefix(prefix + "seg/") for k in host.storage if k.startswith(prefix + "seg/")) == sorted(named)


SVADILFARI = {  # one sentence a file; the first two from CMRC 2018
    "s1.txt": "斯瓦迪尔法利（Svadilfari），北欧神话中的一匹神马，牠是不知名霜巨人的马，是巨人修建围墙时的帮手。",
    "s2.txt": "谁知斯瓦迪尔法利是神马，托运石头非常迅速。",
    "s3.txt": "诸神与巨人约定，若能在一个冬天之内建好围墙，就把太阳、月亮和女神芙蕾雅给他。",
    "s4.txt": "洛基变成一匹母马引开了斯瓦迪尔法利，围墙最终没有按时完成。",
    "s5.txt": "希腊神话中的众神住在奥林匹斯山上。",
    "s6.txt": "日本神话记载了天照大神的故事。",
}


async def test_a_question_finds_the_sentence_holding_more_of_it_before_a_shorter_one_naming_its_subject(
        harness: Harness):
    await ingest_all(harness, SVADILFARI)

    texts = await harness.texts(KB, "斯瓦迪尔法利来自于什么神话？", settings={"search_mode": "keyword", "top_k": 2})

    assert "北欧神话中的一匹神马" in texts[0]
