"""Run seeded random histories of knowledge bases (tests/sim) and shrink the ones that fail.

    python scripts/sim.py --seeds 2000            # seeds 0..1999
    python scripts/sim.py --start 5000 --seeds 500
    python scripts/sim.py --seed 17 --shrink      # one seed, shrunk to a short history

Prints one line per failing seed (the violation) and, with --shrink, the shrunk history as it
would be kept in tests/sim/regressions.py. Runs with PYTHONHASHSEED=0, so that a seed replays
exactly (pytest runs the same histories with its own string hashes: a seed may take another
interleaving there; histories with real threads never replay exactly).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sim.history import generate, run_history, shrink  # noqa: E402


HASH_SEED = "0"  # set iteration order (str hashes) shapes interleavings: the same per run


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *sys.argv])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=300, help="how many seeds")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="run this one seed only")
    parser.add_argument("--shrink", action="store_true", help="shrink each failing history")
    parser.add_argument("--without", default="", help="operations left out, comma-separated: reupload,delete_kb")
    parser.add_argument("--shrink-s", type=float, default=120.0, help="seconds to spend shrinking each")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    started = time.monotonic()
    kinds: Counter[str] = Counter()
    for seed in seeds:
        history = generate(seed, frozenset(filter(None, args.without.split(","))))
        violation = run_history(history)
        if violation is None:
            continue
        kinds[violation.kind] += 1
        print(f"seed {seed} ({history.backend}): {violation}", flush=True)
        if args.shrink:
            small = shrink(history, violation, args.shrink_s)
            print(f"  shrunk to {len(small.steps)} steps: {small!r}")
            print(f"  now: {run_history(small)}", flush=True)
    total = len(seeds)
    print(f"{total} histories, {sum(kinds.values())} failed {dict(kinds)}, {time.monotonic() - started:.1f} s")
    return 1 if kinds else 0


if __name__ == "__main__":
    raise SystemExit(main())
