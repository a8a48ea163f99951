"""``python -m augcse.commands.docs [--check]``: every figure of the docs that comes from records, regenerated.

The maintainers' command (not an ``augcse`` sub-command): run from the repository root after a study's
records change. Three pages are generated whole (the recipe reference, the reproduce coverage, the
augmentation reference); other pages hold blocks between ``<!-- generated: NAME [ARGUMENT] -->`` and
``<!-- end generated -->`` lines, each filled by :data:`BLOCKS` from the records it names (a study's
``study.json``, written by ``augcse study GRID --table-only`` from the runs' own records, or a benchmark's
record under ``docs/records/``). ``--check``
writes nothing and exits 1 naming every page that differs from what its records give (the tests run it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from augcse.core.document import Document, markdown_table

COMMAND = "python -m augcse.commands.docs"
STUDIES = Path("docs/studies")
RECORDS = Path("docs/records")
BLOCK = re.compile(r"^<!-- generated: (?P<name>[\w-]+)(?: (?P<arg>[\w-]+))? -->\n(?P<body>.*?)^<!-- end generated -->$",
                   re.S | re.M)
# how the tables name a study's rows and tasks (the grid files name them by key)
METHOD_NAMES = {"start": "starting model", "simcse": "SimCSE", "augcse": "AugCSE", "sda": "SDA", "cards": "CARDS",
                "vascl": "VaSCL", "composite": "composite", "ct": "CT", "tsdae": "TSDAE", "esimcse": "ESimCSE",
                "promptbert": "PromptBERT", "consert": "ConSERT", "simcse-mlm": "SimCSE w/ MLM", "diffcse": "DiffCSE",
                "declutr": "DeCLUTR", "ct_original": "CT (original)"}
TASK_KINDS = {"intent": "10-shot intent", "clustering": "clustering"}


@cache
def study(name: str) -> dict[str, Any]:
    """A study's figures as ``augcse study --table-only`` wrote them (``docs/studies/NAME/study.json``)."""
    path = STUDIES / name / "study.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{COMMAND}: {path} is missing; run: augcse study GRID --output {STUDIES} --table-only") from None


def _signed(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")


def _suite_of(task: str) -> str:
    from augcse.evaluation.tasks import SUITES, load_builtin_tasks

    load_builtin_tasks()
    return next((TASK_KINDS[s] for s in TASK_KINDS if task in SUITES.get(s, ())), "")


def _final_cell(final: dict[str, Any], seeds: int) -> str:
    """Δ ± sd of a row's final scores; a row with fewer finished seeds than the grid says how many it has."""
    if not final["n"]:
        return "not run yet"
    spread = f" ± {final['sd']:.2f}" if final.get("sd") is not None else ""
    return f"{_signed(final['delta'])}{spread}" + (f" (n={final['n']})" if final["n"] < seeds else "")


def adapt_grid(_: str | None = None) -> list[str]:
    """Δ at the last step against the starting model, method × set, from the adaptation study."""
    grid = study("adapt-curves")
    sets, seeds = grid["sets"], grid["seeds"]
    columns = [(name, figures["tasks"][0]) for name, figures in sets.items()]
    header = ["method", *(f"{task} {_suite_of(task)}".strip() for _, task in columns)]
    rows = [[f"{METHOD_NAMES['start']} (score)",
             *(f"{sets[name]['rows']['start']['final'][task]['mean']:.2f}" for name, task in columns)]]
    for row in next(iter(sets.values()))["rows"]:
        if row == "start":
            continue
        cells = []
        for name, task in columns:
            final = sets[name]["rows"][row]["final"][task]
            cells.append(_final_cell(final, len(seeds)))
        rows.append([METHOD_NAMES.get(row, row), *cells])
    return markdown_table(header, rows, [False] + [True] * len(columns))


def adapt_set(name: str | None) -> list[str]:
    """One set of the adaptation study: its final table and its scores by step, as ``study.md`` has them."""
    from augcse.studies.study import set_tables

    figures = study("adapt-curves")
    if name not in figures["sets"]:
        raise SystemExit(f"{COMMAND}: the adaptation study has no set {name!r}: {sorted(figures['sets'])}")
    doc = Document("")
    doc.add(*set_tables(figures["sets"][name], True, bool(figures["budgets"])))
    lines = doc.to_markdown(Path(".")).strip().splitlines()[1:]  # without the document's title
    return lines[next(i for i, line in enumerate(lines) if line.strip()):]


STS = {"STS12": "STS12", "STS13": "STS13", "STS14": "STS14", "STS15": "STS15", "STS16": "STS16",
       "STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}
STS_AVERAGE = "sts_avg"


def _spread(stats: dict[str, Any]) -> str:
    return f"{stats['mean']:.2f}" + (f" ± {stats['sd']:.2f}" if stats.get("sd") is not None else "")


def methods_minilm(_: str | None = None) -> list[str]:
    """The seven STS tasks and their average per method, mean ± sd over seeds, from the methods study:
    the starting model first, then the methods by average; Δ against SimCSE's average."""
    rows = study("methods-minilm")["sets"]["methods-minilm"]["rows"]
    header = ["method", *STS.values(), "**avg**", "Δ avg vs SimCSE", "n"]
    base = rows["simcse"]["final"][STS_AVERAGE]["mean"]
    methods = sorted((r for r in rows if r != "start"), key=lambda r: -rows[r]["final"][STS_AVERAGE]["mean"])
    body = []
    for row in ["start", *methods] if "start" in rows else methods:
        final = rows[row]["final"]
        average = final[STS_AVERAGE]
        delta = "—" if row == "simcse" else _signed(average["mean"] - base)
        body.append([METHOD_NAMES.get(row, row), *(_spread(final[t]) for t in STS), f"**{_spread(average)}**", delta,
                     str(average["n"])])
    return markdown_table(header, body, [False] + [True] * (len(header) - 1))


def record(name: str) -> dict[str, Any]:
    """A benchmark's measured record (``docs/records/NAME.json``)."""
    path = RECORDS / f"{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{COMMAND}: {path} is missing; the benchmark that writes it names it") from None


def grad_cache(device: str | None) -> list[str]:
    """Step time and peak memory with and without gradient caching (``benchmarks/grad_cache.py``)."""
    rows = record(f"grad-cache-{device}")["rows"]
    baseline = {(r["shape"], r["batch"]): r for r in rows if r.get("mini_batch") is None and not r.get("oom")}
    header = ["encoder", "batch", "mini-batch", "step (s)", "sentences/s", "peak memory (GiB)", "time vs whole batch",
              "memory vs whole batch"]
    body = []
    for r in sorted(rows, key=lambda r: (r["shape"], r["batch"], r.get("mini_batch") or 0)):
        base = baseline.get((r["shape"], r["batch"]))
        if r.get("oom") or "error" in r:
            body.append([r["shape"], str(r["batch"]), str(r.get("mini_batch") or "—"), "out of memory", "", "", "", ""])
            continue
        ratio = (f"{r['step_s'] / base['step_s']:.2f}×", f"{r['peak_gib'] / base['peak_gib']:.2f}×") if base else ("", "")
        body.append([r["shape"], str(r["batch"]), str(r.get("mini_batch") or "— (whole batch)"), f"{r['step_s']:.3f}",
                     f"{r['sentences_per_s']:.0f}", f"{r['peak_gib']:.2f}", *ratio])
    return markdown_table(header, body, [False] + [True] * (len(header) - 1))


def fault_matrix(_: str | None = None) -> list[str]:
    """Every command × every fault of the world: the exit codes, then each case's line and what was left
    (``docs/records/fault-matrix.json``, written by tests/test_fault_matrix.py)."""
    rows = record("fault-matrix")["rows"]
    commands = list(dict.fromkeys(r["command"] for r in rows))
    faults = list(dict.fromkeys(r["fault"] for r in rows))
    codes = {(r["command"], r["fault"]): str(r["exit"]) for r in rows}
    grid = markdown_table(["command", *faults], [[f"`{c}`", *(codes.get((c, f), "—") for f in faults)] for c in commands],
                          [False] + [True] * len(faults))
    cases = markdown_table(["command", "fault", "exit", "the one line", "left on disk"],
                           [[f"`{r['command']}`", r["fault"], str(r["exit"]), f"`{r['line']}`",
                             ", ".join(f"`{x}`" for x in r["left"])] for r in rows],
                           [False, False, True, False, False])
    return [*grid, "", "<details><summary>Each case: the line and what was left</summary>", "", *cases, "",
            "</details>"]


def _reproduce(name: str) -> Callable[[str | None], list[str]]:
    """A block of docs/REPRODUCING.md from the dry run (:mod:`augcse.studies.reproduce_page`), loaded on use."""
    def block(arg: str | None) -> list[str]:
        from augcse.studies import reproduce_page

        return getattr(reproduce_page, name)(arg)

    return block


ADAPT_STUDIES = {"design": "adapt-select", "held out": "adapt-heldout"}  # label in the table: docs/studies/ folder


def adapt_choice(_: str | None = None) -> list[str]:
    """The eight-set table of ``augcse adapt``: what it keeps against the start and the oracle, and each criterion's
    τ, from the design and held-out studies' records (:func:`augcse.studies.adapt_tables.summary`)."""
    from augcse.studies import adapt_tables

    found = {label: adapt_tables.load_records(STUDIES / name) for label, name in ADAPT_STUDIES.items()}
    return adapt_tables.summary({label: by_set for label, by_set in found.items() if by_set})


def cluster_study(arg: str | None = None) -> list[str]:
    """The table of ``augcse cluster``'s design and held-out studies (:func:`augcse.studies.cluster_study.docs_block`)."""
    from augcse.studies import cluster_study as study_tables

    return study_tables.docs_block(arg)


def cluster_headline(arg: str | None = None) -> list[str]:
    """The README's one line of that study (:func:`augcse.studies.cluster_study.headline`)."""
    from augcse.studies import cluster_study as study_tables

    return study_tables.headline(arg)


BLOCKS: dict[str, Callable[[str | None], list[str]]] = {
    "adapt-grid": adapt_grid, "adapt-set": adapt_set, "methods-minilm": methods_minilm, "grad-cache": grad_cache,
    "fault-matrix": fault_matrix, "reproduce-plan": _reproduce("plan_table"),
    "reproduce-settings": _reproduce("row_settings_excerpt"), "reproduce-checkpoints": _reproduce("checkpoints"),
    "reproduce-memory": _reproduce("memory_excerpt"), "adapt-choice": adapt_choice,
    "cluster-study": cluster_study, "cluster-headline": cluster_headline,
}


def pages() -> dict[Path, Callable[[], str]]:
    """The pages generated whole, each by its own module (which also names its own command)."""
    from augcse.studies import adapt_tables, coverage
    from augcse.text.augment import reference as augmentations
    from augcse.training import reference as recipes

    adapt_pages = {STUDIES / name / "study.md": (lambda n=name: adapt_tables.page(STUDIES / n))
                   for name in ADAPT_STUDIES.values() if (STUDIES / name / "records").is_dir()}
    return {Path("docs/RECIPES.md"): recipes.reference, Path("docs/COVERAGE.md"): coverage.document,
            Path("docs/AUGMENTATIONS.md"): augmentations.reference, **adapt_pages}


def fill(text: str) -> str:
    """``text`` with every generated block filled from its records."""
    def block(match: re.Match) -> str:
        name, arg = match["name"], match["arg"]
        if name not in BLOCKS:
            raise SystemExit(f"{COMMAND}: unknown generated block {name!r}; known: {sorted(BLOCKS)}")
        opening = f"<!-- generated: {name}{' ' + arg if arg else ''} -->"
        return "\n".join([opening, *BLOCKS[name](arg), "<!-- end generated -->"])

    return BLOCK.sub(block, text)


def expected() -> dict[Path, str]:
    """Every generated page and every page with generated blocks, as its records give it."""
    out = {path: make() for path, make in pages().items()}
    for path in [Path("README.md"), *sorted(Path("docs").glob("*.md"))]:
        if path in out:
            continue
        text = path.read_text(encoding="utf-8")
        if "<!-- generated:" in text:
            out[path] = fill(text)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the pages out of date")
    args = parser.parse_args(argv)
    if not Path("docs").is_dir():
        parser.error("run it from the repository root (no docs/ folder here)")
    stale = []
    for path, text in expected().items():
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if args.check and stale:
        print(f"out of date: {', '.join(map(str, stale))}; run: {COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
