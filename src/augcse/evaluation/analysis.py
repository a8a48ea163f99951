"""Augmentation analysis (AugCSE §6.1, Fig. 6/7): does a good positive look like its original?

For each augmentation, two point-wise statistics over (original, augmented) sentence pairs:

- ``similarity``: mean cosine between sentence embeddings of original and augmentation (the paper
  uses ``sentence-transformers/all-mpnet-base-v2``);
- ``lm_diff``: mean LM-score difference, score(augmented) − score(original); the paper uses GPT-2
  perplexity, so a positive value means the augmentation reads less naturally.

Each is set against the downstream score (e.g. ``sts``, ``transfer``) of a run trained with that
single augmentation as positive, and correlated across augmentations (Pearson and Spearman). The
paper reports Pearson similarity↔STS-B 0.72, ↔transfer 0.60; PPL-difference ↔STS-B −0.53,
↔transfer −0.58.

Inputs are plain: arrays of embeddings or lists of numbers and ``{augmentation: {key: value}}`` dicts,
so any encoder, language model or run layout can feed it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import pearsonr, spearmanr


def pair_similarity(originals: np.ndarray, augmented: np.ndarray) -> np.ndarray:
    """Cosine similarity of each (original, augmented) embedding row pair."""
    a = np.asarray(originals, dtype=np.float64)
    b = np.asarray(augmented, dtype=np.float64)
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.sum(a * b, axis=1)


def lm_difference(original_scores: Sequence[float], augmented_scores: Sequence[float]) -> np.ndarray:
    """Per pair ``score(augmented) − score(original)`` (e.g. perplexities)."""
    return np.asarray(augmented_scores, dtype=np.float64) - np.asarray(original_scores, dtype=np.float64)


def augmentation_stats(
    pairs: Mapping[str, tuple[Sequence[str], Sequence[str]]],
    encode: Callable[[list[str]], np.ndarray],
    lm_score: Callable[[list[str]], Sequence[float]] | None = None,
) -> dict[str, dict[str, float]]:
    """``{augmentation: (originals, augmented)}`` -> ``{augmentation: {"similarity", "lm_diff", "n"}}``.

    Pairs where the augmentation left the sentence unchanged still count: they are what training sees.
    """
    out: dict[str, dict[str, float]] = {}
    for name, (orig, aug) in pairs.items():
        orig, aug = list(orig), list(aug)
        stats = {"similarity": float(np.mean(pair_similarity(encode(orig), encode(aug)))), "n": float(len(orig))}
        if lm_score is not None:
            stats["lm_diff"] = float(np.mean(lm_difference(lm_score(orig), lm_score(aug))))
        out[name] = stats
    return out


@dataclass(frozen=True)
class Correlation:
    """Correlation of one statistic with one downstream score across augmentations."""

    statistic: str
    downstream: str
    pearson: float
    spearman: float
    n: int


def correlations(
    stats: Mapping[str, Mapping[str, float]],
    downstream: Mapping[str, Mapping[str, float]],
    statistics: Sequence[str] = ("similarity", "lm_diff"),
    scores: Sequence[str] | None = None,
) -> list[Correlation]:
    """Pearson/Spearman between each statistic and each downstream score over the augmentations present
    in both inputs (NaN when fewer than 3 augmentations or a constant column)."""
    names = [n for n in stats if n in downstream]
    if scores is None:
        scores = sorted({k for n in names for k in downstream[n]})
    out = []
    for stat in statistics:
        for score in scores:
            rows = [(stats[n][stat], downstream[n][score]) for n in names if stat in stats[n] and score in downstream[n]]
            x = np.array([r[0] for r in rows], dtype=np.float64)
            y = np.array([r[1] for r in rows], dtype=np.float64)
            if len(rows) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
                p = s = math.nan
            else:
                p, s = float(pearsonr(x, y)[0]), float(spearmanr(x, y)[0])
            out.append(Correlation(stat, score, p, s, len(rows)))
    return out


def analysis_table(
    stats: Mapping[str, Mapping[str, float]], downstream: Mapping[str, Mapping[str, float]]
) -> list[dict[str, float | str]]:
    """One row per augmentation: its statistics and downstream scores (the Fig. 6 table)."""
    rows = []
    for name in stats:
        row: dict[str, float | str] = {"augmentation": name, **{k: v for k, v in stats[name].items() if k != "n"}}
        row.update(downstream.get(name, {}))
        rows.append(row)
    return rows
