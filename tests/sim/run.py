"""Run seeded random histories of knowledge bases (tests/sim) and shrink the ones that fail.

    python tests/sim/run.py --seeds 2000            # seeds 0..1999
    python tests/sim/run.py --start 5000 --seeds 500
    python tests/sim/run.py --seed 17 --shrink      # one seed, shrunk to a short history
    python tests/sim/run.py --seeds 200-1699 --summary   # failures per kind, explained or not
    python tests/sim/run.py --seeds 5000 --load 4   # the same beside 4 busy processes (CPU contention)

Prints one line per failing seed (the violation) and, with --shrink, the shrunk history as it
would be kept in tests/sim/regressions.py. With --summary, each line says whether an open defect
(tests/sim/regressions.OPEN_IN_RANDOM_HISTORIES) explains the violation, and a table at the end
counts the failures per kind: unexplained ones (which the default test run would fail on) first. Runs with PYTHONHASHSEED=0, so that a seed replays
exactly (pytest runs the same histories with its own string hashes: a seed may take another
interleaving there; histories with real threads never replay exactly).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sim.history import generate, run_history, shrink  # noqa: E402
from tests.sim.regressions import OPEN_IN_RANDOM_HISTORIES  # noqa: E402


HASH_SEED = "0"  # set iteration order (str hashes) shapes interleavings: the same per run


def seed_range(text: str) -> range:
    """"N" is seeds 0..N-1; "A-B" is seeds A..B, both included."""
    first, dash, last = text.partition("-")
    return range(int(first), int(last) + 1) if dash else range(int(first))


def explaining_defect(violation: str) -> str | None:
    return next((defect for pattern, defect in OPEN_IN_RANDOM_HISTORIES.items()
                 if re.search(pattern, violation)), None)


def print_summary(failures: dict[int, str], total: int) -> None:
    unexplained: dict[str, list[int]] = defaultdict(list)
    explained: dict[str, list[int]] = defaultdict(list)
    for seed, violation in failures.items():
        defect = explaining_defect(violation)
        kind = violation.split(":", 1)[0]
        (unexplained[kind] if defect is None else explained[f"{kind} ({defect})"]).append(seed)
    print(f"{total} histories, {len(failures)} failed: "
          f"{sum(map(len, unexplained.values()))} unexplained, {sum(map(len, explained.values()))} explained")
    for title, groups in (("unexplained", unexplained), ("explained by an open defect", explained)):
        for kind, seeds in sorted(groups.items(), key=lambda item: -len(item[1])):
            print(f"  {title:>27}  {len(seeds):4}  {kind}: {' '.join(map(str, seeds))}")


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *sys.argv])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=seed_range, default=range(300),
                        help="how many seeds (N: 0..N-1), or a range A-B (both included)")
    parser.add_argument("--start", type=int, default=0, help="first seed (with --seeds N)")
    parser.add_argument("--seed", type=int, help="run this one seed only")
    parser.add_argument("--shrink", action="store_true", help="shrink each failing history")
    parser.add_argument("--without", default="", help="operations left out, comma-separated: reupload,delete_kb")
    parser.add_argument("--shrink-s", type=float, default=120.0, help="seconds to spend shrinking each")
    parser.add_argument("--summary", action="store_true",
                        help="mark each failure explained or not, and count them per kind at the end")
    parser.add_argument("--load", type=int, default=0,
                        help="run beside this many busy processes (CPU contention: worker threads' timing)")
    args = parser.parse_args()
    with busy_processes(args.load):
        return run(args)


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` processes that keep a core busy each while inside."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: sum(i * i for i in range(10000))"])
                for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def run(args: argparse.Namespace) -> int:
    logging.disable(logging.CRITICAL)
    if args.seed is not None:
        seeds: range | list[int] = [args.seed]
    else:
        seeds = range(args.seeds.start + args.start, args.seeds.stop + args.start)
    started = time.monotonic()
    kinds: Counter[str] = Counter()
    failures: dict[int, str] = {}
    for seed in seeds:
        history = generate(seed, frozenset(filter(None, args.without.split(","))))
        violation = run_history(history)
        if violation is None:
            continue
        kinds[violation.kind] += 1
        failures[seed] = str(violation)
        mark = ("" if not args.summary else
                " [unexplained]" if explaining_defect(str(violation)) is None else " [explained]")
        print(f"seed {seed} ({history.backend}){mark}: {violation}", flush=True)
        if args.shrink:
            small = shrink(history, violation, args.shrink_s)
            print(f"  shrunk to {len(small.steps)} steps: {small!r}")
            print(f"  now: {run_history(small)}", flush=True)
    total = len(seeds)
    load = ", load average %.1f %.1f %.1f" % os.getloadavg()
    print(f"{total} histories, {sum(kinds.values())} failed {dict(kinds)}, {time.monotonic() - started:.1f} s{load}")
    if args.summary:
        print_summary(failures, total)
    return 1 if kinds else 0


if __name__ == "__main__":
    raise SystemExit(main())
