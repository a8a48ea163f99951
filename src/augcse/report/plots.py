"""Pictures of the papers (PNG, matplotlib Agg): projections of original vs augmented embeddings
(AugCSE Fig. 2–4), training curves (Fig. 5), clustering confusion matrices, and the augmentation
analysis scatter (Fig. 6/7). Inputs are arrays, labels and log records, never a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from augcse.core.outputs import write_atomically

ORIGINAL = "original"


def _save(fig: plt.Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda handle: fig.savefig(handle, format="png", dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- projections


def _pca(x: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.decomposition import PCA

    return PCA(n_components=2, random_state=seed).fit_transform(x)


def _tsne(x: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.manifold import TSNE

    perplexity = float(min(30, max(2, (len(x) - 1) // 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(x)


PROJECTIONS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {"pca": _pca, "tsne": _tsne}


def project(x: np.ndarray, method: str = "pca", seed: int = 0) -> np.ndarray:
    """2-D coordinates of the rows of x (``"pca"`` or ``"tsne"``)."""
    if method not in PROJECTIONS:
        raise ValueError(f"unknown projection {method!r}; known: {', '.join(PROJECTIONS)}")
    return PROJECTIONS[method](np.asarray(x, dtype=np.float64), seed)


def embedding_projection(
    original: np.ndarray,
    augmented: np.ndarray,
    aug_labels: Sequence[str],
    path: str | Path,
    method: str = "pca",
    title: str | None = None,
    seed: int = 0,
    links: bool = True,
) -> Path:
    """Originals (grey) and their augmentations coloured by augmentation, projected jointly to 2-D.

    ``augmented[i]`` is the augmentation ``aug_labels[i]`` of ``original[i]``; with ``links`` a faint
    line joins each pair (how far each augmentation moves a sentence).
    """
    original, augmented = np.asarray(original), np.asarray(augmented)
    if len(original) != len(augmented) or len(augmented) != len(aug_labels):
        raise ValueError("original, augmented and aug_labels must have the same length")
    xy = project(np.vstack([original, augmented]), method, seed)
    xo, xa = xy[: len(original)], xy[len(original) :]
    fig, ax = plt.subplots(figsize=(7, 6))
    if links:
        for (x0, y0), (x1, y1) in zip(xo, xa):
            ax.plot([x0, x1], [y0, y1], color="0.8", linewidth=0.5, zorder=1)
    ax.scatter(xo[:, 0], xo[:, 1], s=14, c="0.45", label=ORIGINAL, zorder=2)
    labels = np.asarray(aug_labels)
    cmap = plt.get_cmap("tab20")
    for i, name in enumerate(dict.fromkeys(labels.tolist())):
        sel = labels == name
        ax.scatter(xa[sel, 0], xa[sel, 1], s=14, color=cmap(i % 20), label=name, zorder=3)
    ax.set_title(title or f"{method.upper()} of original and augmented sentence embeddings")
    ax.legend(fontsize=7, markerscale=1.2, loc="best", frameon=False)
    ax.set_xticks([])
    ax.set_yticks([])
    return _save(fig, path)


# --------------------------------------------------------------------------- training curves

EVAL_NOISE = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_loss")
NOT_CURVES = frozenset({"step", "epoch", "total_flos", "train_runtime", "train_samples_per_second",
                        "train_steps_per_second", "train_loss"})


def _is_dev(key: str) -> bool:
    return key.startswith("eval_") and key not in EVAL_NOISE


def _is_discriminator(key: str) -> bool:
    leaf = key.rsplit("/", 1)[-1]
    return not key.startswith("eval_") and ("acc" in leaf or "predicted" in leaf)


def _is_lr(key: str) -> bool:
    return key.startswith("learning_rate")


def _is_grad_norm(key: str) -> bool:
    return key == "grad_norm"


def _is_loss(key: str) -> bool:
    """``loss`` and every named loss component (the trainer logs components under their own names,
    e.g. ``contrastive``, ``loss_discriminator``): whatever numeric key no other panel claims."""
    return key not in NOT_CURVES and not key.startswith("eval_")


# Panels of the training-curve figure, in order: title -> which log keys it shows (first match wins).
CURVE_PANELS: dict[str, Callable[[str], bool]] = {
    "dev score": _is_dev,
    "discriminator accuracy": _is_discriminator,
    "learning rate": _is_lr,
    "gradient norm": _is_grad_norm,
    "losses": _is_loss,
}
PANEL_ORDER = ("losses", "dev score", "discriminator accuracy", "learning rate", "gradient norm")


def curve_series(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, tuple[list[float], list[float]]]]:
    """``{panel: {key: (steps, values)}}`` from log records (one dict per logging event)."""
    out: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for rec in records:
        step = rec.get("step")
        if step is None:
            continue
        for key, value in rec.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                continue
            for panel, wanted in CURVE_PANELS.items():
                if wanted(key):
                    steps, values = out.setdefault(panel, {}).setdefault(key, ([], []))
                    steps.append(float(step))
                    values.append(float(value))
                    break
    return {panel: _distinct(out[panel]) for panel in PANEL_ORDER if panel in out}


def _distinct(lines: dict[str, tuple[list[float], list[float]]]) -> dict[str, tuple[list[float], list[float]]]:
    """One line per distinct series: keys logging the same numbers (a one-task dev suite's task score,
    its average and ``score``) share a line, labelled ``first = second``."""
    kept: dict[str, tuple[list[float], list[float]]] = {}
    for key, series in lines.items():
        same = next((label for label, other in kept.items() if other == series), None)
        if same is None:
            kept[key] = series
        else:
            kept[f"{same} = {key}"] = kept.pop(same)
    return kept


def spans_decades(values: Sequence[float], decades: float = 2.0) -> bool:
    """Whether positive values span at least ``decades`` powers of ten (then a log axis shows them)."""
    return bool(values) and min(values) > 0 and math.log10(max(values) / min(values)) >= decades


def training_curves(records: Sequence[Mapping[str, Any]], path: str | Path, title: str | None = None) -> Path | None:
    """One panel per kind of logged value (losses per component, dev score, discriminator accuracy,
    learning rate); None when the log has nothing to plot."""
    series = curve_series(records)
    if not series:
        return None
    columns = min(2, len(series))  # two panels a row stay readable in a page or a README
    rows = math.ceil(len(series) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.4 * columns, 3.3 * rows), squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    for ax, (panel, lines) in zip(axes.flat, series.items()):
        for key, (steps, values) in lines.items():
            marker = "o" if len(steps) < 30 else None
            ax.plot(steps, values, marker=marker, markersize=3, linewidth=1.2, label=key)
        every = [v for _, values in lines.values() for v in values]
        if spans_decades(every):
            ax.set_yscale("log")
        ax.set_title(panel + (" (log scale)" if spans_decades(every) else ""))
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------- comparisons


def group_bars(groups: Mapping[str, Mapping[str, Sequence[float]]], path: str | Path, title: str = "") -> Path:
    """Per task, each group's mean with a ±1 sample-sd error bar, and its seeds as dots beside it.

    Means are points, not filled bars: runs differ by tenths of a point on a 0–100 scale, which a bar
    from zero hides and a bar from a cut axis exaggerates.
    """
    tasks = list(dict.fromkeys(t for scores in groups.values() for t in scores))
    width = 0.8 / max(len(groups), 1)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(tasks) * max(len(groups), 1) ** 0.5 + 2), 3.8))
    cmap = plt.get_cmap("tab10")
    extent: list[float] = []  # every seed's score and every error bar's ends: the axis shows them all
    for g, (label, scores) in enumerate(groups.items()):
        x = np.arange(len(tasks)) + (g - (len(groups) - 1) / 2) * width
        values = [list(scores.get(t, [])) for t in tasks]
        means = [float(np.mean(v)) if v else np.nan for v in values]
        sds = [float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for v in values]
        ax.errorbar(x, means, yerr=sds, fmt="o", markersize=7, capsize=4, color=cmap(g % 10), label=label, zorder=3)
        for xi, v in zip(x, values):
            ax.scatter([xi + 0.25 * width] * len(v), v, s=10, color=cmap(g % 10), alpha=0.6, linewidths=0, zorder=2)
        extent += [e for v, m, sd in zip(values, means, sds) for e in (*v, m - sd, m + sd)]
    finite = [v for v in extent if np.isfinite(v)]
    if finite:
        low, high = min(finite), max(finite)
        ax.set_ylim(low - 0.15 * (high - low + 1), high + 0.15 * (high - low + 1))
    for boundary in range(1, len(tasks)):
        ax.axvline(boundary - 0.5, color="0.85", linewidth=0.8)
    ax.set_xlim(-0.5, len(tasks) - 0.5)
    ax.set_xticks(range(len(tasks)), tasks, rotation=30 if len(tasks) > 4 else 0, ha="right" if len(tasks) > 4 else "center")
    ax.set_ylabel("score")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------- clustering


def confusion_matrix_plot(
    matrix: np.ndarray, path: str | Path, labels: Sequence[str] | None = None, title: str = "clustering confusion"
) -> Path:
    """Rows: true classes; columns: clusters matched to classes (diagonal = agreement), row-normalised."""
    m = np.asarray(matrix, dtype=np.float64)
    norm = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
    n = len(m)
    fig, ax = plt.subplots(figsize=(min(2 + 0.45 * n, 14), min(1.6 + 0.45 * n, 13)))
    im = ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    ax.set_xlabel("matched cluster")
    ax.set_ylabel("true class")
    ax.set_title(title)
    if n <= 30:
        names = list(labels) if labels is not None else [str(i) for i in range(n)]
        ax.set_xticks(range(n), names, rotation=90, fontsize=7)
        ax.set_yticks(range(n), names, fontsize=7)
        if n <= 12:
            for i in range(n):
                for j in range(n):
                    ax.text(j, i, int(m[i, j]), ha="center", va="center", fontsize=7,
                            color="white" if norm[i, j] > 0.5 else "black")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return _save(fig, path)


# --------------------------------------------------------------------------- augmentation analysis


def analysis_scatter(
    rows: Sequence[Mapping[str, Any]], x: str, y: str, path: str | Path, label_key: str = "augmentation"
) -> Path:
    """Scatter of one statistic against one downstream score, one labelled point per augmentation,
    with the Pearson r in the title (AugCSE Fig. 7)."""
    pts = [(r[x], r[y], str(r.get(label_key, ""))) for r in rows if x in r and y in r]
    xs = np.array([p[0] for p in pts], dtype=np.float64)
    ys = np.array([p[1] for p in pts], dtype=np.float64)
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    ax.scatter(xs, ys, s=22)
    for xv, yv, name in pts:
        ax.annotate(name, (xv, yv), fontsize=7, xytext=(3, 3), textcoords="offset points")
    r = float(np.corrcoef(xs, ys)[0, 1]) if len(pts) > 2 and np.ptp(xs) > 0 and np.ptp(ys) > 0 else float("nan")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{y} vs {x} (Pearson r = {r:.2f})")
    ax.grid(alpha=0.3)
    return _save(fig, path)
