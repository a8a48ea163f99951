"""The tables of the ``augcse adapt`` design and held-out studies, made from their records alone.

A record is one run's ``adapt.json`` (copied to ``docs/studies/<study>/records/<set>-seed<k>.json``): every
candidate's label-free criteria and its labelled score. From them:

- :func:`criteria_tau`: per set, Kendall's τ between each criterion (read in the direction the chooser reads it:
  lower-is-better criteria negated) and the labelled score, over a run's candidates, mean ± sd over seeds;
- :func:`rule_gains`: per set and rule, the labelled score of the candidate each rule keeps, against the starting
  model's, with the oracle (the best candidate in hindsight) beside it.

Every rule of :data:`RULES` reads only ``step``, ``alpha`` and ``criteria`` (the chooser's inputs): the labelled score
is looked up afterwards. ``python -m augcse.studies.adapt_tables STUDY_DIR`` writes ``STUDY_DIR/study.md`` (``python -m augcse.commands.docs``
regenerates it with the other generated pages, and its ``--check`` holds it to the records).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from augcse.core.outputs import write_text_atomically
from augcse.training.adapt import LOWER_IS_BETTER, best_with_floor, choose, furthest_within

CRITERIA = ("heldout_loss", "knn_overlap", "rankme", "alignment", "uniformity", "kmeans_stability")
Rule = Callable[[Sequence[dict[str, Any]]], tuple[int, float]]


def _start(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in records if r["step"] == 0)


def _rule(pick: Callable[[Sequence[dict[str, Any]]], dict[str, Any] | None]) -> Rule:
    """A rule from a function that picks a candidate record (or none: the starting model)."""
    def rule(records: Sequence[dict[str, Any]]) -> tuple[int, float]:
        best = pick(records)
        return (0, 0.0) if best is None else (best["step"], best["alpha"])

    return rule


def _best_with_floor(criterion: str, floor: float) -> Rule:
    return _rule(lambda records: best_with_floor(records, criterion, floor))


def _furthest_within(floor: float) -> Rule:
    return _rule(lambda records: furthest_within(records, floor))


def _fixed(step: int, alpha: float) -> Rule:
    return lambda records: (step, alpha) if any(r["step"] == step and r["alpha"] == alpha for r in records) else (0, 0.0)


def _frozen(records: Sequence[dict[str, Any]]) -> tuple[int, float]:
    c = choose(records)
    return c.step, c.alpha


RULES: dict[str, Rule] = {
    "augcse adapt (choose, frozen)": _frozen,
    "starting model": lambda records: (0, 0.0),
    **{f"heldout_loss, knn ≥ {f:g}": _best_with_floor("heldout_loss", f) for f in (0.5, 0.7, 0.8, 0.9, 0.95)},
    **{f"rankme, knn ≥ {f:g}": _best_with_floor("rankme", f) for f in (0.5, 0.7, 0.8, 0.9, 0.95)},
    **{f"uniformity, knn ≥ {f:g}": _best_with_floor("uniformity", f) for f in (0.7, 0.9)},
    **{f"kmeans_stability, knn ≥ {f:g}": _best_with_floor("kmeans_stability", f) for f in (0.5, 0.8)},
    **{f"furthest with knn ≥ {f:g}": _furthest_within(f) for f in (0.85, 0.9, 0.93, 0.95, 0.97)},
    **{f"fixed: step {s}, α {a:g}": _fixed(s, a) for s in (16, 64, 128) for a in (0.25, 0.5, 1.0)},
}


def load_records(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """``{set: [record per seed]}`` from ``folder/records/<set>-seed<k>.json``."""
    by_set: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(Path(folder, "records").glob("*-seed*.json")):
        name = path.stem.rsplit("-seed", 1)[0]
        by_set.setdefault(name, []).append(json.loads(path.read_text(encoding="utf-8")))
    return by_set


def score_of(candidate: dict[str, Any], record: dict[str, Any]) -> float:
    """The candidate's labelled score: the sample task's headline score."""
    sample = candidate["sample"]
    task = record["sample_task"]
    return float(sample[task] if task in sample else next(v for k, v in sample.items() if not k.endswith("_avg")))


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import kendalltau

    tau = kendalltau(x, y).statistic
    return float("nan") if tau != tau else float(tau)


def criteria_tau(record: dict[str, Any]) -> dict[str, float]:
    """τ of each criterion (chooser's direction) with the labelled score over one run's candidates."""
    cands = record["candidates"]
    scores = [score_of(c, record) for c in cands]
    return {name: kendall_tau([(-1 if name in LOWER_IS_BETTER else 1) * c["criteria"][name] for c in cands], scores)
            for name in CRITERIA}


def kept_score(record: dict[str, Any], rule: Rule) -> float:
    inputs = [{k: c[k] for k in ("step", "alpha", "criteria")} for c in record["candidates"]]
    step, alpha = rule(inputs)
    chosen = next(c for c in record["candidates"] if c["step"] == step and (step == 0 or c["alpha"] == alpha))
    return score_of(chosen, record)


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def rule_gains(by_set: dict[str, list[dict[str, Any]]], rule: Rule) -> dict[str, dict[str, float]]:
    """Per set: start score, kept mean and sd over seeds, Δ, and whether kept ≥ start − sd ("safe")."""
    out = {}
    for name, records in by_set.items():
        start = statistics.fmean(score_of(_start(r["candidates"]), r) for r in records)
        mean, sd = _mean_sd([kept_score(r, rule) for r in records])
        out[name] = {"start": start, "kept": mean, "sd": sd, "delta": mean - start,
                     "safe": float(mean >= start - sd - 1e-9)}
    return out


def oracle(by_set: dict[str, list[dict[str, Any]]]) -> dict[str, tuple[float, float]]:
    """Per set: the best candidate's score in hindsight, mean and sd over seeds."""
    return {name: _mean_sd([max(score_of(c, r) for c in r["candidates"]) for r in records])
            for name, records in by_set.items()}


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def tables(by_set: dict[str, list[dict[str, Any]]], title: str, started: dict[str, Any] | None = None) -> str:
    sets = list(by_set)
    seeds = {n: len(r) for n, r in by_set.items()}
    lines = [f"# {title}", "", "Generated by `python -m augcse.commands.docs` from `records/` (one `adapt.json` a run); "
             "do not edit.", "", f"Runs: {', '.join(f'{n} {k}' for n, k in seeds.items())} seeds.", "",
             "## Kendall's τ of each criterion with the labelled score", "",
             "Over a run's candidates (the starting model and each budget at each α), the criterion read as the chooser "
             "reads it (held-out loss, alignment and uniformity negated: lower is better), mean ± sd over seeds. "
             "A criterion that ranks candidates as the labels do has τ near 1; one that ranks them in reverse, near −1.",
             "", _row(["criterion", *sets]), _row(["---", *["---:"] * len(sets)])]
    for name in CRITERIA:
        cells = []
        for s in sets:
            m, sd = _mean_sd([criteria_tau(r)[name] for r in by_set[s]])
            cells.append(f"{m:+.2f} ± {sd:.2f}")
        lines.append(_row([f"`{name}`", *cells]))
    best = oracle(by_set)
    lines += ["", "## The score each rule keeps", "",
              "Mean labelled score of the kept candidate over seeds (Δ against the starting model; ✗ where the mean is "
              "below the starting model minus one seed sd). The oracle is the best candidate in hindsight, which needs "
              "labels.", "", _row(["rule", *sets, "mean Δ", "sets safe"]), _row(["---", *["---:"] * (len(sets) + 2)])]
    start = rule_gains(by_set, RULES["starting model"])
    lines.append(_row(["starting model (score)", *[f"{start[s]['start']:.2f}" for s in sets], "0.00", f"{len(sets)}"]))
    for name, rule in RULES.items():
        if name == "starting model":
            continue
        g = rule_gains(by_set, rule)
        cells = [f"{g[s]['delta']:+.2f} ± {g[s]['sd']:.2f}{'' if g[s]['safe'] else ' ✗'}" for s in sets]
        lines.append(_row([name, *cells, f"{statistics.fmean(g[s]['delta'] for s in sets):+.2f}",
                           f"{sum(int(g[s]['safe']) for s in sets)}"]))
    lines.append(_row(["oracle (labels, hindsight)", *[f"{best[s][0] - start[s]['start']:+.2f} ± {best[s][1]:.2f}"
                                                       for s in sets],
                       f"{statistics.fmean(best[s][0] - start[s]['start'] for s in sets):+.2f}", "—"]))
    return "\n".join(lines) + "\n"


def summary(studies: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """The eight-set table of docs/ADAPTATION.md: per set, the starting model, what ``augcse adapt`` keeps (the
    frozen :func:`~augcse.training.adapt.choose`), the oracle, and each criterion's τ; ``studies``: ``{study label:
    {set: records}}``, e.g. design sets then held-out sets."""
    rule = RULES["augcse adapt (choose, frozen)"]
    head = ["set", "study", "starting model", "augcse adapt keeps", "Δ", "oracle (hindsight)",
            *[f"τ `{c}`" for c in CRITERIA]]
    lines = [_row(head), _row(["---", "---", *["---:"] * (len(head) - 2)])]
    deltas, oracles = [], []
    for label, by_set in studies.items():
        gains, best = rule_gains(by_set, rule), oracle(by_set)
        for name, records in by_set.items():
            g = gains[name]
            taus = [_mean_sd([criteria_tau(r)[c] for r in records])[0] for c in CRITERIA]
            deltas.append(g["delta"])
            oracles.append(best[name][0] - g["start"])
            lines.append(_row([f"{name} ({len(records)} seeds)", label, f"{g['start']:.2f}",
                               f"{g['kept']:.2f} ± {g['sd']:.2f}{'' if g['safe'] else ' ✗'}", f"{g['delta']:+.2f}",
                               f"{best[name][0]:.2f} ({oracles[-1]:+.2f})", *[f"{t:+.2f}" for t in taus]]))
    lines.append(_row(["mean", "", "", "", f"{statistics.fmean(deltas):+.2f}", f"({statistics.fmean(oracles):+.2f})",
                       *[""] * len(CRITERIA)]))
    return lines


TITLES = {"adapt-select": "augcse adapt: the design study (SNIPS, HWU64, Tweet, SearchSnippets)",
          "adapt-heldout": "augcse adapt: the held-out study (BANKING77, CLINC150, StackOverflow, Biomedical), rule frozen"}


def page(folder: Path) -> str:
    """``folder/study.md`` as its records give it (the title from :data:`TITLES` by the folder's name)."""
    started = Path(folder) / "started.json"
    return tables(load_records(folder), TITLES.get(Path(folder).name, "augcse adapt: label-free choice"),
                  json.loads(started.read_text(encoding="utf-8")) if started.is_file() else None)


if __name__ == "__main__":
    target = Path(sys.argv[1]) / "study.md"
    write_text_atomically(target, page(Path(sys.argv[1])))
    print(target)
