"""Seeded random histories (tests/sim/history.py) in the default run: CI_SEEDS of them, in
batches, plus every shrunk regression history. `scripts/sim.py --seeds N` runs thousands."""

from __future__ import annotations

import logging

import pytest

from tests.sim.history import generate, run_history
from tests.sim.regressions import REGRESSIONS

CI_SEEDS = 300
BATCH = 25


@pytest.fixture(autouse=True)
def quiet() -> None:
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("first", range(0, CI_SEEDS, BATCH))
def test_random_histories_keep_every_invariant(first: int) -> None:
    failures = {}
    for seed in range(first, first + BATCH):
        violation = run_history(generate(seed))
        if violation is not None:
            failures[seed] = str(violation)
    assert not failures, "\n".join(f"seed {s}: {v} (python scripts/sim.py --seed {s} --shrink)"
                                    for s, v in failures.items())


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_shrunk_regression_history(name: str) -> None:
    assert run_history(REGRESSIONS[name]) is None
