"""How a benchmark collection is chunked: chunk count, share of fragments, embedding overhead.

    python bench/chunk_stats.py scifact cisi drcd cmrc

Each document goes through the real parser and chunker, uploaded as bench/bench_retrieval.py
uploads it (file_body; a Markdown set's sections as headings) with the default creation settings. Prints chunks,
documents cut into several chunks, mean chunk length, characters sent to the embedding model
÷ characters of document text, and chunks (embed text) shorter than 128 characters.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib.datasets import DATASETS, load_dataset  # noqa: E402
from lucidrag.base.settings import parse_creation_settings  # noqa: E402
from lucidrag.ingestion.chunking import chunk_document  # noqa: E402
from lucidrag.ingestion.parsing.registry import parse_bytes  # noqa: E402
from bench.bench_retrieval import file_body  # noqa: E402


def main(names: list[str]) -> None:
    settings = parse_creation_settings({"embedding_model_uuid": "m"})
    for name in names:
        ds = load_dataset(name)
        ext = DATASETS[name].file_ext
        lengths: list[int] = []
        embedded = source = small = multi = 0
        for title, text in ds.corpus.values():
            document = parse_bytes(file_body(title, text, ext).encode(), f"doc{ext}")
            chunks = chunk_document(document, settings).chunks
            source += len(document.text)
            multi += len(chunks) > 1
            for chunk in chunks:
                lengths.append(len(chunk.text))
                embedded += len(chunk.embed_text)
                small += len(chunk.embed_text) < 128
        print(f"{name}: {len(lengths):,} chunks from {len(ds.corpus):,} docs ({multi:,} cut), mean "
              f"{statistics.mean(lengths):.0f} chars, embedded/doc chars {embedded / source:.3f}, "
              f"chunks < 128 chars {small:,} ({small / len(lengths):.1%})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["scifact", "drcd"])
