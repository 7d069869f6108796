#!/usr/bin/env python3
"""Mutation testing of LucidRAG's core with mutmut 3: does the unit suite notice when
one line of the code changes? Not part of CI (hours for the whole core on 2 cores).

    /work/venv/bin/pip install -r requirements-mutation.txt
    nice -n 10 python tests/mutation/run.py                          # every module, in priority order
    nice -n 10 python tests/mutation/run.py lucidrag/state/kbstate.py lucidrag/index/segindex.py
    python tests/mutation/run.py --report-only lucidrag/state/kbstate.py   # tables from an earlier run
    python tests/mutation/run.py --survivors lucidrag/state/kbstate.py     # the diff of each survivor
    # new tests against what an earlier run left alive (RESULTS: its `mutmut results --all true`);
    # the modules go before --tests
    python tests/mutation/run.py lucidrag/state/kbstate.py --work-dir DIR --only-unkilled RESULTS --tests FILE...

Per module, a copy of the working tree goes to --work-dir/<module>/ (the repository itself is never
touched), with a setup.cfg that has mutmut mutate only that module. mutmut first runs the unit
suite once to learn which tests call which function, then runs each mutant against only those
tests, in a forked worker, stopping at the first failure (`pytest -x`): a killed mutant costs one
failing test. One worker (`--max-children 1`): the machine is shared. A rerun in the same
--work-dir keeps the killed mutants of unchanged functions and runs the others again.

Logging calls are not mutated (the text of a log line is not behaviour a user or the index sees).
A surviving mutant listed in tests/mutation/equivalents.toml (its mutmut name and why it cannot
change behaviour) is counted as equivalent, not as a survivor. The score is
killed / (killed + survived), timeouts counting as killed (the mutant made a test hang).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENTS = ROOT / "tests" / "mutation" / "equivalents.toml"

# In priority order: if a full run does not fit, the first ones matter most.
MODULES = [
    "lucidrag/state/kbstate.py",
    "lucidrag/state/kbcore.py",
    "lucidrag/state/kbload.py",
    "lucidrag/state/journals.py",
    "lucidrag/state/filereads.py",
    "lucidrag/state/store.py",
    "lucidrag/index/segindex.py",
    "lucidrag/retrieval/fusion.py",
    "lucidrag/retrieval/retrieve.py",
    "lucidrag/vectors/embedding.py",
    "lucidrag/ingestion/chunking.py",
    "lucidrag/ingestion/parsing/faqtext.py",
    "lucidrag/ingestion/ingest.py",
    "lucidrag/state/lifecycle.py",
    "lucidrag/state/records.py",
    "lucidrag/state/recordcache.py",
    "lucidrag/state/kbdelete.py",
    "lucidrag/state/failures.py",
    "lucidrag/state/storage_keys.py",
    "lucidrag/state/saved_settings.py",
    "lucidrag/index/terms.py",
    "lucidrag/retrieval/filters.py",
    "lucidrag/retrieval/localfilter.py",
    "lucidrag/vectors/scoring.py",
    "lucidrag/vectors/vectorscan.py",
]

# The tests run against a module's mutants (to keep a run within hours on 2 shared cores); a
# module not listed gets the whole unit suite. mutmut narrows further to the tests that call the
# mutated function. Changing a list makes mutmut discard the module's earlier results.
STATE_TESTS = ["tests/test_state_runtime.py", "tests/test_state_lifecycle.py", "tests/test_deletion_statistics.py",
               "tests/test_store.py", "tests/test_faults.py", "tests/test_engine.py", "tests/test_console.py",
               "tests/test_scale_state.py"]
TESTS = {
    "lucidrag/state/kbstate.py": STATE_TESTS,
    "lucidrag/state/kbcore.py": STATE_TESTS,
    "lucidrag/state/kbload.py": STATE_TESTS,
    "lucidrag/state/journals.py": STATE_TESTS,
    "lucidrag/state/filereads.py": STATE_TESTS,
    "lucidrag/state/store.py": STATE_TESTS,
    "lucidrag/index/segindex.py": ["tests/test_segindex.py", "tests/test_segindex_integrity.py", "tests/test_keyword.py",
                                   "tests/test_deletion_statistics.py"],
    "lucidrag/retrieval/fusion.py": ["tests/test_retrieval_units.py", "tests/test_ranking_fields.py",
                                     "tests/test_keyword.py", "tests/test_engine.py", "tests/test_bench_retrieval.py"],
    "lucidrag/retrieval/retrieve.py": ["tests/test_retrieval_units.py", "tests/test_retrieve_passages.py",
                                       "tests/test_ranking_fields.py", "tests/test_what_the_bot_is_told.py",
                                       "tests/test_engine.py"],
    "lucidrag/vectors/embedding.py": ["tests/test_runtime.py", "tests/test_embedding.py", "tests/test_faults.py",
                                      "tests/test_offline_embed.py", "tests/test_engine.py"],
    "lucidrag/ingestion/ingest.py": ["tests/test_ingest_paths.py", "tests/test_engine.py", "tests/test_faults.py",
                                     "tests/test_hostile.py", "tests/test_runtime.py", "tests/test_lifecycle.py",
                                     "tests/test_ingest_memory.py", "tests/test_storage_leaks.py",
                                     "tests/test_backends.py", "tests/test_ocr.py", "tests/test_state_runtime.py",
                                     "tests/test_state_lifecycle.py", "tests/test_console.py"],
    "lucidrag/state/lifecycle.py": ["tests/test_state_lifecycle.py", "tests/test_state_runtime.py",
                                    "tests/test_lifecycle.py", "tests/test_unsaved_records.py", "tests/sim/"],
    "lucidrag/ingestion/chunking.py": ["tests/test_chunking.py", "tests/test_chunking_edges.py", "tests/test_hostile.py",
                                       "tests/test_what_the_bot_is_told.py", "tests/test_retrieval_units.py"],
    "lucidrag/ingestion/parsing/faqtext.py": ["tests/test_faq_text.py", "tests/test_faq_sheets.py", "tests/test_hostile.py"],
    "lucidrag/index/terms.py": ["tests/test_keyword.py", "tests/test_terms.py", "tests/test_segindex.py",
                                "tests/test_retrieval_units.py"],
    "lucidrag/state/records.py": STATE_TESTS + ["tests/test_retrieve_passages.py", "tests/test_unsaved_records.py",
                                                "tests/test_storage_leaks.py", "tests/test_restart_load.py",
                                                "tests/test_records.py"],
    "lucidrag/state/kbdelete.py": ["tests/test_backends.py", "tests/test_engine.py", "tests/test_hook_budgets.py",
                                   "tests/test_ingest_paths.py", "tests/test_scale_state.py", "tests/test_kbdelete.py"],
    "lucidrag/state/storage_keys.py": STATE_TESTS + ["tests/test_storage_leaks.py", "tests/test_restart_load.py",
                                                     "tests/test_lifecycle.py", "tests/test_backends.py",
                                                     "tests/test_storage_keys.py"],
    "lucidrag/state/failures.py": ["tests/test_console.py", "tests/test_faults.py", "tests/test_engine.py",
                                   "tests/test_ingest_paths.py", "tests/test_failures.py"],
    "lucidrag/state/recordcache.py": STATE_TESTS + ["tests/test_runtime.py", "tests/test_unsaved_records.py",
                                                    "tests/test_recordcache.py"],
    "lucidrag/retrieval/filters.py": ["tests/test_backends.py", "tests/test_engine.py", "tests/test_keyword.py",
                                      "tests/test_records.py", "tests/test_state_runtime.py", "tests/test_filters.py"],
    "lucidrag/retrieval/localfilter.py": ["tests/test_backends.py", "tests/test_engine.py", "tests/test_records.py",
                                          "tests/test_state_runtime.py", "tests/test_filters.py"],
    "lucidrag/vectors/scoring.py": ["tests/test_backends.py", "tests/test_ingest_paths.py", "tests/test_retrieval_units.py",
                                    "tests/test_engine.py", "tests/test_ranking_fields.py", "tests/test_scoring.py"],
    "lucidrag/vectors/vectorscan.py": ["tests/test_backends.py", "tests/test_engine.py", "tests/test_state_lifecycle.py",
                                       "tests/test_state_runtime.py", "tests/test_console.py", "tests/test_records.py",
                                       "tests/test_vectorscan.py"],
    "lucidrag/state/snapshotload.py": ["tests/test_restart_load.py", "tests/test_state_runtime.py",
                                       "tests/test_state_lifecycle.py", "tests/test_scale_state.py",
                                       "tests/test_storage_leaks.py", "tests/test_lifecycle.py",
                                       "tests/test_snapshotload.py"],
}

# Tests that check the repository or the built package, not behaviour: they cannot kill a
# mutant, and the packaging one shells out to git, which the copy does not have.
NOT_BEHAVIOUR = ["tests/test_layout.py", "tests/test_packaging.py", "tests/e2e"]
NOT_MUTATED = [r"^\s*logger\.(debug|info|warning|error|exception)\("]

KILLED = {"killed", "timeout"}


def slug(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def prepare(module: str, work: Path, tests: list[str] | None = None) -> None:
    """A copy of the working tree (tracked and new files, not ignored ones) with mutmut's config."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    work.mkdir(parents=True, exist_ok=True)
    for name in files:
        source = ROOT / name
        if not source.is_file():
            continue
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)  # unchanged files keep their mtime: mutmut's cache holds
    tops = sorted({name.split("/", 1)[0] for name in files} - {"lucidrag", "tests", "setup.cfg"})
    lines = ["[mutmut]", "source_paths=lucidrag", f"only_mutate={module}",
             "also_copy=" + "\n    ".join(tops),
             "pytest_add_cli_args_test_selection=" + "\n    ".join(
                 t for t in tests or TESTS.get(module, ["tests/"]) if (ROOT / t).exists()),
             "pytest_add_cli_args=" + "\n    ".join(f"--ignore={p}" for p in NOT_BEHAVIOUR),
             "do_not_mutate_patterns=" + "\n    ".join(NOT_MUTATED),
             # a mutant slower than 3x its tests' clean run (+5 s for a loaded machine) hangs
             "timeout_multiplier=3.0", "timeout_constant=5.0", ""]
    (work / "setup.cfg").write_text("\n".join(lines))


def run(work: Path, rerun: bool, only: list[str] | None = None) -> None:
    """Run the mutants not run yet; on a rerun, also every mutant the earlier tests did not kill
    (tests were only added since, so a killed mutant stays killed unless its function changed,
    and then mutmut makes it anew). With `only`, just those mutants."""
    command = ["nice", "-n", "10", str(Path(sys.executable).with_name("mutmut")), "run", "--max-children", "1"]
    subprocess.run(command + (only or []), cwd=work, stdout=subprocess.DEVNULL, check=True)
    if only:
        return
    if rerun:
        again = sorted(name for name, status in statuses(work).items() if status not in KILLED)
        if again:
            subprocess.run(command + again, cwd=work, stdout=subprocess.DEVNULL, check=True)


def statuses(work: Path) -> dict[str, str]:
    mutmut = Path(sys.executable).with_name("mutmut")
    out = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=work, check=True,
                         capture_output=True, text=True).stdout
    return dict(re.findall(r"^\s*(\S+): (.+)$", out, re.MULTILINE))


def equivalent_mutants(path: Path = EQUIVALENTS) -> dict[str, str]:
    """Full mutmut name -> why it is equivalent, from the data file's per-module tables."""
    with path.open("rb") as f:
        tables = tomllib.load(f)
    return {f"{slug(module)}.{name}": why for module, mutants in tables.items() for name, why in mutants.items()}


def score(module: str, found: dict[str, str], equivalent: dict[str, str]) -> tuple[Counter, list[str]]:
    counts: Counter = Counter()
    survivors = []
    for name, status in found.items():
        if status in KILLED:
            counts["killed"] += 1
        elif name in equivalent:
            counts["equivalent"] += 1
        elif status in ("survived", "no tests"):
            counts["survived"] += 1
            survivors.append(name)
        else:
            counts[status] += 1  # e.g. "not checked": the run was stopped
    return counts, survivors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", default=MODULES)
    parser.add_argument("--work-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "lucidrag-mutation")
    parser.add_argument("--report-only", action="store_true", help="print the scores of an earlier run")
    parser.add_argument("--survivors", action="store_true", help="print the diff of every survivor")
    parser.add_argument("--tests", nargs="+", metavar="FILE",
                        help="these test files instead of the module's selection (e.g. only the new tests, "
                             "against --only-unkilled mutants: a mutant they kill is killed by the suite)")
    parser.add_argument("--only-unkilled", type=Path, metavar="RESULTS",
                        help="run only the mutants not killed in this `mutmut results --all true` output")
    args = parser.parse_args()
    equivalent = equivalent_mutants()
    mutmut = Path(sys.executable).with_name("mutmut")
    print("| module | mutants | killed | survived | equivalent | not run | score |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total: Counter = Counter()
    for module in args.modules:
        work = args.work_dir / slug(module)
        if not args.report_only:
            rerun = (work / "mutants").is_dir()
            prepare(module, work, args.tests)
            only = None
            if args.only_unkilled:
                listed = re.findall(r"^\s*(\S+): (.+)$", args.only_unkilled.read_text(), re.MULTILINE)
                only = [name for name, status in listed if status not in KILLED and name.startswith(slug(module) + ".")]
            run(work, rerun, only)
        counts, survivors = score(module, statuses(work), equivalent)
        total.update(counts)
        live = counts["killed"] + counts["survived"]
        pct = f"{100 * counts['killed'] / live:.0f} %" if live else "-"
        print(f"| {module} | {sum(counts.values())} | {counts['killed']} | {counts['survived']} | "
              f"{counts['equivalent']} | {counts['not checked']} | {pct} |", flush=True)
        if args.survivors:
            for name in survivors:
                diff = subprocess.run([str(mutmut), "show", name], cwd=work, capture_output=True, text=True).stdout
                print(diff, file=sys.stderr)
    live = total["killed"] + total["survived"]
    if len(args.modules) > 1 and live:
        print(f"| all | {sum(total.values())} | {total['killed']} | {total['survived']} | "
              f"{total['equivalent']} | {total['not checked']} | {100 * total['killed'] / live:.0f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
