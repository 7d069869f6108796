"""scripts/offline_embed.py as the runtime E2E uses it: a flaky provider on demand, vectors of the
size a model name asks for. Served over real HTTP on a free port."""

from __future__ import annotations

import importlib.util
import json
import threading
import urllib.error
import urllib.request
from collections import Counter
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "offline_embed.py"


@pytest.fixture()
def server():
    spec = importlib.util.spec_from_file_location("offline_embed_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), mod.Handler)
    srv.dim, srv.minilm, srv.model_name = 64, None, "lucidrag-hash-embed"
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as f:
            return f.status, json.loads(f.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _outcomes(base: str, n: int) -> list[int]:
    return [_post(base + "/v1/embeddings", {"input": ["a text"], "model": "m"})[0] for _ in range(n)]


def test_fault_mode_fails_a_seeded_fifth_of_requests_with_429_and_500(server):
    status, now = _post(server + "/faults", {"rate": 0.2, "seed": 7, "slow_s": 0})
    assert status == 200 and now == {"rate": 0.2, "seed": 7, "slow_s": 0.0}
    first = _outcomes(server, 200)
    counts = Counter(first)
    injected = json.loads(urllib.request.urlopen(server + "/faults", timeout=10).read())["injected"]
    assert counts[429] == injected["429"] > 0 and counts[500] == injected["500"] > 0
    assert 25 <= sum(injected.values()) <= 55  # ~20 % of 200, slow answers included
    assert set(counts) == {200, 429, 500}

    _post(server + "/faults", {"rate": 0.2, "seed": 7})  # same seed: the same sequence again
    assert _outcomes(server, 200) == first


def test_fault_mode_off_answers_every_request(server):
    _post(server + "/faults", {"rate": 0.2, "seed": 7, "slow_s": 0})
    _post(server + "/faults", {"rate": 0})
    assert set(_outcomes(server, 50)) == {200}


def test_a_bad_fault_setting_is_refused(server):
    status, body = _post(server + "/faults", {"rate": 2})
    assert status == 400 and "rate" in body["error"]["message"]


def test_a_model_name_ending_in_dN_gets_N_dimensions(server):
    _, small = _post(server + "/v1/embeddings", {"input": ["harbour ledger"], "model": "offline-embed-d256"})
    _, default = _post(server + "/v1/embeddings", {"input": ["harbour ledger"], "model": "offline-embed"})
    assert len(small["data"][0]["embedding"]) == 256
    assert len(default["data"][0]["embedding"]) == 64
