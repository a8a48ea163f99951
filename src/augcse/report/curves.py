"""Learning curves of a study (PNG): score against training steps per row, mean ± sd band over seeds.

One panel per task; the starting model (step 0 only) is a dashed horizontal line across the panel.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.ticker import ScalarFormatter

from augcse.report.plots import _save, plt


def learning_curves(rows: Mapping[str, Mapping[str, Mapping[int, Mapping[str, Any]]]], path: str | Path,
                    title: str = "") -> Path:
    """``rows[row][task][step]`` holds ``mean`` and ``sd`` (None for one seed); steps on a log axis
    (budgets grow geometrically), 0 drawn as the starting model's level."""
    tasks = list(dict.fromkeys(task for curve in rows.values() for task in curve))
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(5.2 * max(1, len(tasks)), 3.8), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, task in zip(axes[0], tasks):
        for index, (row, curve) in enumerate(rows.items()):
            points = {step: s for step, s in curve.get(task, {}).items() if s.get("mean") is not None}
            color = cmap(index % 10)
            if not points:  # a row with no finished run yet: no line, no legend entry
                continue
            if set(points) == {0}:
                ax.axhline(points[0]["mean"], color=color, linestyle="--", linewidth=1.2, label=row)
                continue
            steps = sorted(step for step in points if step > 0)
            means = [points[s]["mean"] for s in steps]
            sds = [points[s]["sd"] or 0.0 for s in steps]
            ax.plot(steps, means, marker="o", markersize=4, color=color, label=row)
            ax.fill_between(steps, [m - d for m, d in zip(means, sds)], [m + d for m, d in zip(means, sds)],
                            color=color, alpha=0.18, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())  # 16, 64, 256 rather than powers of two
        ax.set_xlabel("training steps")
        ax.set_ylabel(task)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # off the curves
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)
