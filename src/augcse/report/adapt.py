"""The report of an ``augcse adapt`` run (``adapt.md`` / ``adapt.html``): the verdict as its first line, the
criteria of every candidate as a table and a picture, and, with a labelled sample, its score against budget
for each α. Reads only the record the command wrote (``adapt.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from augcse.core.document import Document, Heading, Image, Paragraph, Table

CRITERIA = ("heldout_loss", "knn_overlap", "rankme", "alignment", "uniformity", "kmeans_stability")


def _by_alpha(record: dict[str, Any], value) -> dict[float, tuple[list[int], list[float]]]:
    """One line per α > 0: the starting model at step 0, then the candidates of that α by step."""
    start = next(r for r in record["candidates"] if r["step"] == 0)
    lines: dict[float, tuple[list[int], list[float]]] = {}
    for r in record["candidates"]:
        if r["step"] > 0:
            steps, values = lines.setdefault(r["alpha"], ([0], [value(start)]))
            steps.append(r["step"])
            values.append(value(r))
    return lines


def plot(record: dict[str, Any], path: Path) -> Path:
    """Each criterion (and the sample score, when there is one) against step, one line per α."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task = record.get("sample_task")
    panels = [*CRITERIA, *([task] if task else [])]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3), squeeze=False)
    for ax, name in zip(axes[0], panels):
        pick = (lambda r, n=name: r["sample"][n]) if name == task else (lambda r, n=name: r["criteria"][n])
        for alpha, (steps, values) in sorted(_by_alpha(record, pick).items()):
            ax.plot(steps, values, marker="o", label=f"α {alpha:g}")
        ax.set_title(name if name != task else f"labelled sample: {name}", fontsize=9)
        ax.set_xlabel("step")
    axes[0][0].legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def write_report(record: dict[str, Any], run_dir: Path) -> tuple[Path, Path]:
    """Write ``adapt.md`` and ``adapt.html`` into ``run_dir``; the title (first line) is the verdict."""
    task = record.get("sample_task")
    header = ["step", "α", *CRITERIA, *([f"sample {task}"] if task else [])]
    rows = [[str(r["step"]), f"{r['alpha']:g}", *(f"{r['criteria'][c]:.4f}" for c in CRITERIA),
             *([f"{r['sample'][task]:.2f}"] if task else [])] for r in record["candidates"]]
    chosen = record["chosen"]
    doc = Document(record["verdict"]).add(
        Paragraph(f"Rule: `{record['rule']}` (provisional: not yet measured against labelled scores). Kept: step "
                  f"{chosen['step']}, α {chosen['alpha']:g}; final/ holds those weights. Criteria on "
                  f"{record['held_out_texts']} held-out texts never trained on."),
        Heading("Candidates"), Table(header, rows),
        Image(plot(record, run_dir / "adapt.png").resolve(), "label-free criteria against step, one line per α"),
    )
    if record.get("budgets_not_reached"):
        doc.add(Paragraph(f"Budgets not reached (the texts ran out first): {record['budgets_not_reached']}"))
    return doc.write(run_dir, "adapt")
