"""Seeded random histories (tests/sim/history.py) in the default run: CI_SEEDS of them, in
batches, plus every shrunk regression history. `tests/sim/run.py --seeds N` runs thousands."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.sim.history import generate, run_history
from tests.sim.regressions import OPEN_DEFECTS, OPEN_IN_RANDOM_HISTORIES, REGRESSIONS

CI_SEEDS = 200
BATCH = 25
THREADED_SEED = 4  # a history whose blocking work runs in real worker threads


def explained_by_an_open_defect(violation: str) -> bool:
    return any(re.search(pattern, violation) for pattern in OPEN_IN_RANDOM_HISTORIES)


@pytest.fixture(autouse=True)
def quiet() -> None:
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("first", range(0, CI_SEEDS, BATCH))
def test_random_histories_keep_every_invariant(first: int) -> None:
    """Every invariant, except violations that a listed open defect explains
    (regressions.OPEN_IN_RANDOM_HISTORIES)."""
    failures = {}
    for seed in range(first, first + BATCH):
        violation = run_history(generate(seed))
        if violation is not None and not explained_by_an_open_defect(str(violation)):
            failures[seed] = str(violation)
    assert not failures, "\n".join(f"seed {s}: {v} (python tests/sim/run.py --seed {s} --shrink)"
                                    for s, v in failures.items())


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=OPEN_DEFECTS[name]))
    if name in OPEN_DEFECTS else name
    for name in sorted(REGRESSIONS)
])
def test_shrunk_regression_history(name: str) -> None:
    assert run_history(REGRESSIONS[name]) is None


def test_a_history_waits_for_its_executors_shutdown_however_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's end shuts the loop's executor down and waits for it (its threads joined). When that
    took the loop's first look (a busy machine), the virtual-time loop called it a deadlock and left
    the coroutine half way; the garbage collector later ran its `thread.join()` inside a thread that
    was starting, which deadlocked the whole test run (CI hung in test_sim for over an hour)."""
    finished = []
    shutdown = asyncio.BaseEventLoop.shutdown_default_executor

    async def watched(loop: asyncio.BaseEventLoop, *args: object, **kwargs: object) -> None:
        await shutdown(loop, *args, **kwargs)
        finished.append(True)

    def slow_join(executor: ThreadPoolExecutor, *args: object, **kwargs: object) -> None:
        time.sleep(0.3)  # the machine is busy
        real_shutdown(executor, *args, **kwargs)

    real_shutdown = ThreadPoolExecutor.shutdown
    monkeypatch.setattr(asyncio.BaseEventLoop, "shutdown_default_executor", watched)
    monkeypatch.setattr(ThreadPoolExecutor, "shutdown", slow_join)
    history = generate(THREADED_SEED)
    assert history.threads
    run_history(history)
    assert finished == [True]
