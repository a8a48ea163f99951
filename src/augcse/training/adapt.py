"""``augcse adapt``: train one recipe on a user's texts, score label-free criteria for every (budget, α)
candidate, and keep one by a rule that never sees a label.

The training is :func:`augcse.training.run.run` (run folder, lock, checkpoints, resume, progress bars);
:class:`augcse.training.snapshots.Snapshots` saves the weights at step 0 and at each budget into ``candidates/``. A seeded share of the
texts (``held_out``) is never trained on: every criterion of :mod:`augcse.evaluation.label_free` is computed
on it. :func:`choose` reads only those criteria records. Its rule, chosen on four design sets and frozen before four
held-out sets were run (docs/ADAPTATION.md): the candidate that moved furthest while keeping at least
:data:`MIN_AGREEMENT` of the starting model's nearest neighbours, else the starting model.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from augcse.core.outputs import write_text_atomically
from augcse.core.paths import expect_file
from augcse.core.textfile import read_text, why_not_utf8

MIN_AGREEMENT = 0.93  # share of the starting model's 10 nearest neighbours a kept candidate must keep (design study)
RECORD = "adapt.json"
LOWER_IS_BETTER = ("heldout_loss", "alignment", "uniformity")

# The override set of each method on the base recipe (docs/ADAPTATION.md, "Method settings").
METHODS: dict[str, list[str]] = {
    "simcse": [],
    "augcse": ["loss.name=augcse",
               "loss.params={variant: augcse, discriminator_weight: 0.005, grl_alpha: -1.0, head: bn, symmetric: true}",
               "data.views=[{name: augcse_sample, augmentations: 8-2-aug}]"],
    "sda": ["loss.name=sda", "loss.params={margin: 0.5, neg_block: diag, head: bn}",
            "data.views=[{name: sda, positive: ensemble, negation: true, proportion: 1.0}]"],
    "vascl": ["loss.name=vascl", "loss.params={topk: 16, eps: 0.65, detach: true, head: vascl}",
              'training.learning_rate_mapping={"head\\\\.": 1.0e-3}'],
    "cards": ["loss.name=cards", "loss.params={temperature: 0.05}",
              "data.views=[{name: cards, switch_case: true, p: 0.05, variant: v2, k: 64, s: 1, sampling: R_uniform}]"],
    "tsdae": ["loss.name=tsdae", "data.views=[{name: tsdae_noise}]"],
    "ct": ["loss.name=ct"],
    "esimcse": ["loss.name=esimcse", "loss.params={temperature: 0.05, head: none, momentum: 0.995, queue_size: 80}",
                "data.views=[{name: esimcse_repetition, dup_rate: 0.32, unit: subword, draw: paper}]"],
    "promptbert": ["loss.name=promptbert", "loss.params={temperature: 0.05, denoise: true, different_template: true}",
                   "model.pooler=prompt"],
}


# --------------------------------------------------------------------------- the user's texts

def _csv_texts(path: Path, column: str, delimiter: str) -> list[str]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        if reader.fieldnames is None:
            raise ValueError(f"{path}: is empty; give a file whose first line names its columns, the texts under "
                             "one of them (--column, default text)")
        if column not in reader.fieldnames:
            raise ValueError(f"{path}: no column {column!r} (columns: {', '.join(reader.fieldnames)}); name the text "
                             "column with --column")
        return [row[column] or "" for row in reader]


def _lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file, ending where the corpus reader ends them (at CR in a file of old Mac line ends);
    a file that is not UTF-8 is refused naming it and what it most likely is."""
    from augcse.text.corpus import HEAD_BYTES

    text = read_text(path, str(path))
    head = text[:HEAD_BYTES]
    return text.split("\r" if "\r" in head and "\n" not in head else "\n")


def _jsonl_texts(path: Path, column: str) -> list[str]:
    texts = []
    for number, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {number} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or column not in row:
            raise ValueError(f"{path}: line {number} has no key {column!r}; name the text key with --column")
        texts.append(str(row[column]))
    return texts


def _parquet_texts(path: Path, column: str) -> list[str]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=[column])
    except KeyError:
        raise ValueError(f"{path}: no column {column!r}; name the text column with --column") from None
    except Exception as exc:  # pyarrow's own error types for a file that is not Parquet
        raise ValueError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    return [str(v) for v in table.column(column).to_pylist() if v is not None]


READERS: dict[str, Callable[[Path, str], list[str]]] = {
    ".csv": lambda p, c: _csv_texts(p, c, ","),
    ".tsv": lambda p, c: _csv_texts(p, c, "\t"),
    ".jsonl": _jsonl_texts,
    ".parquet": _parquet_texts,
    ".txt": lambda p, c: _lines(p),
}


def read_rows(path: str | Path, column: str = "text", if_empty: str | None = None) -> tuple[Path, list[str]]:
    """Every row of ``path``'s texts (by suffix: :data:`READERS`), stripped, "" where a row holds no text; a wrong
    file is one ``ValueError`` line (an empty one too, saying ``if_empty``, when given; else each reader says it).
    The one reader of ``augcse adapt`` and ``augcse cluster``."""
    path = expect_file(path, "texts file", f"one of {', '.join(READERS)}")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"texts file {path}: unknown kind of file {path.suffix or '(no suffix)'}; give one of "
                         f"{', '.join(READERS)}")
    if if_empty is not None and path.stat().st_size == 0:
        raise ValueError(f"texts file {path}: is empty; {if_empty}")
    try:
        return path, [t.strip() if isinstance(t, str) else "" for t in reader(path, column)]
    except UnicodeDecodeError as exc:
        raise ValueError(f"texts file {path}: not UTF-8 text (byte {exc.start}); {why_not_utf8(path)}") from None


def read_texts(path: str | Path, column: str = "text", minimum: int = 32) -> list[str]:
    """The non-empty texts of ``path`` (:func:`read_rows`); fewer than ``minimum`` is one ``ValueError`` line."""
    path, rows = read_rows(path, column)
    texts = [t for t in rows if t]
    if len(texts) < minimum:
        raise ValueError(f"{path}: {len(texts)} non-empty texts; adapt needs at least {minimum}")
    return texts


def split_texts(texts: Sequence[str], held_out: int, seed: int) -> tuple[list[str], list[str]]:
    """A seeded split: (texts to train on, ``held_out`` texts never trained on, where the criteria are computed)."""
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    held = sorted(order[:held_out])
    kept = set(held)
    return [t for i, t in enumerate(texts) if i not in kept], [texts[i] for i in held]


# --------------------------------------------------------------------------- candidates along one run

# --------------------------------------------------------------------------- criteria and the choice

def criteria(model, texts: Sequence[str], start_embeddings, clusters: int, batch_size: int = 64) -> dict[str, float]:
    """Every label-free criterion of ``model`` on ``texts`` (two dropout views, and one plain encoding)."""
    import numpy as np
    import torch

    from augcse.evaluation import label_free as lf

    def dropout_view(seed: int):
        """One embedding per text with dropout on (``encode`` would switch the model to eval mode)."""
        model.train()
        out = []
        with torch.random.fork_rng(), torch.no_grad():
            torch.manual_seed(seed)
            for i in range(0, len(texts), batch_size):
                batch = model.preprocess(list(texts[i:i + batch_size]))
                features = {k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
                out.append(model(features)["sentence_embedding"].float().cpu().numpy())
        model.eval()
        return np.concatenate(out)

    plain = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    view1, view2 = dropout_view(1), dropout_view(2)
    reference = plain if start_embeddings is None else start_embeddings
    return {
        "heldout_loss": lf.heldout_contrastive_loss(view1, view2),
        "knn_overlap": lf.knn_overlap(plain, reference, k=min(10, len(texts) - 1)),
        "rankme": lf.rankme(plain),
        "alignment": lf.alignment_over_views(view1, view2),
        "uniformity": lf.uniformity(plain),
        "kmeans_stability": lf.kmeans_stability(plain, clusters),
    }


@dataclass(frozen=True)
class Choice:
    step: int  # 0: the starting model
    alpha: float
    verdict: str  # one line: what was kept and why


def _within(records: Sequence[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """The trained candidates (step and α above 0) that keep at least ``floor`` of the start's nearest neighbours."""
    return [r for r in records if r["step"] > 0 and r["alpha"] > 0 and r["criteria"]["knn_overlap"] >= floor]


def best_with_floor(records: Sequence[dict[str, Any]], criterion: str, floor: float) -> dict[str, Any] | None:
    """The candidate best on ``criterion`` among those keeping at least ``floor`` of the starting model's nearest
    neighbours and beating the starting model on ``criterion``; ``None`` when there is none. ``records``: one per
    candidate, its ``step``, ``alpha`` and ``criteria`` only (the step-0 record is the starting model)."""
    sign = -1.0 if criterion in LOWER_IS_BETTER else 1.0
    start = next(r for r in records if r["step"] == 0)["criteria"][criterion]
    fit = [r for r in _within(records, floor) if sign * r["criteria"][criterion] > sign * start]
    return max(fit, key=lambda r: sign * r["criteria"][criterion]) if fit else None


def furthest_within(records: Sequence[dict[str, Any]], floor: float) -> dict[str, Any] | None:
    """The candidate that moved furthest from the starting model (the fewest of its nearest neighbours kept)
    while keeping at least ``floor`` of them; ``None`` when every candidate kept fewer."""
    fit = _within(records, floor)
    return min(fit, key=lambda r: (r["criteria"]["knn_overlap"], -r["step"], -r["alpha"])) if fit else None


def choose(records: Sequence[dict[str, Any]], min_agreement: float | None = None) -> Choice:
    """The rule of ``augcse adapt``, chosen by its design study (docs/ADAPTATION.md): keep the candidate that moved
    furthest from the starting model while keeping at least ``min_agreement`` (default :data:`MIN_AGREEMENT`) of
    each held-out text's 10 nearest neighbours; the starting model when every candidate moved further. On the four
    design sets no criterion ranked candidates as the labels did on both kinds of set (their τ changes sign between
    intent and clustering sets), and only a neighbour floor kept every set at or above the starting model.
    ``records``: one per candidate, its ``step``, ``alpha`` and ``criteria`` only (the step-0 record is the start)."""
    min_agreement = MIN_AGREEMENT if min_agreement is None else min_agreement
    base = next(r for r in records if r["step"] == 0)["criteria"]["heldout_loss"]
    best = furthest_within(records, min_agreement)
    if best is None:
        return Choice(0, 0.0, f"kept the starting model: every candidate kept fewer than {min_agreement:.0%} of its "
                              "nearest neighbours")
    c = best["criteria"]
    return Choice(best["step"], best["alpha"],
                  f"kept step {best['step']} at alpha {best['alpha']:g}: the furthest candidate keeping "
                  f"{min_agreement:.0%} of the starting model's nearest neighbours ({c['knn_overlap']:.0%}; held-out "
                  f"contrastive loss {c['heldout_loss']:.3f} against {base:.3f})")


def choose_by_sample(records: Sequence[dict[str, Any]], task: str) -> Choice:
    """The candidate with the best labelled sample score (only with ``--choose-by-sample``)."""
    best = max(records, key=lambda r: r["sample"][task])
    if best["step"] == 0 or best["alpha"] == 0:
        return Choice(0, 0.0, f"kept the starting model: no candidate beat it on the labelled sample ({task})")
    return Choice(best["step"], best["alpha"], f"kept step {best['step']} at alpha {best['alpha']:g}: best on the "
                                               f"labelled sample ({task} {best['sample'][task]:.2f})")


def candidate_grid(budgets: Sequence[int], alphas: Sequence[float]) -> list[tuple[int, float]]:
    """(step, α) of every candidate: the starting model first, then each budget at each α above 0."""
    return [(0, 0.0)] + [(b, a) for b in budgets for a in alphas if a > 0]


def select(run_dir: Path, held: Sequence[str], budgets: Sequence[int], alphas: Sequence[float],
           sample_task: str | None, data_dir: Path | None, by_sample: bool, clusters: int,
           batch_size: int, sample_fast: bool = False, what_ran: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score every candidate, choose, write ``final/`` (the chosen weights) and ``adapt.json``; the record.
    ``what_ran``: every input of the run as given and as used (``inputs`` in the record)."""
    from sentence_transformers import SentenceTransformer
    from tqdm.auto import tqdm

    from augcse.evaluation.suite import main_scores, run_tasks
    from augcse.training.interpolate import interpolate
    from augcse.training.snapshots import load_snapshot, snapshot_path

    final = Path(run_dir) / "final"
    model = SentenceTransformer(str(final), device="cpu")
    start = load_snapshot(run_dir, 0)
    reached = [b for b in budgets if snapshot_path(run_dir, b).is_file()]
    records, start_embeddings = [], None
    for step, alpha in tqdm(candidate_grid(reached, alphas), desc="scoring candidates"):
        model.load_state_dict(start if step == 0 else interpolate(start, load_snapshot(run_dir, step), alpha))
        record: dict[str, Any] = {"step": step, "alpha": alpha,
                                  "criteria": criteria(model, held, start_embeddings, clusters, batch_size)}
        if step == 0:
            model.eval()
            start_embeddings = model.encode(list(held), batch_size=batch_size, convert_to_numpy=True,
                                            show_progress_bar=False)
        if sample_task:
            record["sample"] = main_scores(run_tasks(model, sample_task, data_dir, fast=sample_fast,
                                                     batch_size=batch_size, progress=False))
        records.append(record)
    inputs = [{k: r[k] for k in ("step", "alpha", "criteria")} for r in records]
    choice = choose_by_sample(records, sample_task) if by_sample and sample_task else choose(inputs)
    model.load_state_dict(start if choice.step == 0 else
                          interpolate(start, load_snapshot(run_dir, choice.step), choice.alpha))
    model.save(str(final))
    record = {"verdict": choice.verdict, "chosen": {"step": choice.step, "alpha": choice.alpha},
              "rule": "choose_by_sample" if by_sample and sample_task else "choose",
              "min_agreement": MIN_AGREEMENT, "chooser_inputs": inputs, "candidates": records,
              "budgets_not_reached": [b for b in budgets if b not in reached],
              "held_out_texts": len(held), "sample_task": sample_task, "sample_fast": sample_fast,
              "inputs": what_ran or {}}
    write_text_atomically(Path(run_dir) / RECORD, json.dumps(record, indent=2))
    return record
