"""The report of an ``augcse adapt`` run (``adapt.md`` / ``adapt.html``): the verdict as its first line, the
criteria of every candidate as a table and a picture, and, with a labelled sample, its score against budget
for each α. Reads only the record the command wrote (``adapt.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from augcse.core.document import Document, Heading, Image, Paragraph, Table

CRITERIA = ("heldout_loss", "knn_overlap", "rankme", "alignment", "uniformity", "kmeans_stability")
# what each rule of adapt.json is, in the report's words (docs/ADAPTATION.md tells how the rule was chosen)
RULES = {
    "choose": "frozen before four held-out sets were run and measured on them, as docs/ADAPTATION.md tells; it keeps "
              "the candidate that moved furthest within the neighbour floor, not one it can promise is better",
    "choose_by_sample": "the best score on the labelled sample (--choose-by-sample)",
}


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


def _inputs(inputs: dict[str, Any]) -> list:
    """What the run was given and what it used (absent from records written before adapt kept them)."""
    if not inputs:
        return []
    texts = inputs["texts"]
    rows = [["texts", texts["given"], f"{texts['copy']['train']} ({texts['train_texts']} texts), "
                                      f"{texts['copy']['held_out']}; sha256 {texts['sha256'][:16]}…"]]
    rows += [[f"--{key.replace('_', '-')}", _shown(value["given"], "(default)"), _shown(value["used"], "—")]
             for key, value in inputs.items() if key not in ("texts", "sample")]
    if "sample" in inputs:
        rows.append(["--sample", inputs["sample"]["given"], f"sha256 {inputs['sample']['sha256'][:16]}…"])
    return [Heading("What ran"), Table(["input", "as given", "as used"], rows, align_right=False)]


def _shown(value: Any, missing: str) -> str:
    if value is None:
        return missing
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) if isinstance(value, list) \
        else str(value)


def write_report(record: dict[str, Any], run_dir: Path) -> tuple[Path, Path]:
    """Write ``adapt.md`` and ``adapt.html`` into ``run_dir``; the title (first line) is the verdict."""
    task = record.get("sample_task")
    header = ["step", "α", *CRITERIA, *([f"sample {task}"] if task else [])]
    rows = [[str(r["step"]), f"{r['alpha']:g}", *(f"{r['criteria'][c]:.4f}" for c in CRITERIA),
             *([f"{r['sample'][task]:.2f}"] if task else [])] for r in record["candidates"]]
    chosen = record["chosen"]
    doc = Document(record["verdict"]).add(
        Paragraph(f"Rule: `{record['rule']}` ({RULES[record['rule']]}). Kept: step {chosen['step']}, α "
                  f"{chosen['alpha']:g}; final/ holds those weights. Criteria on {record['held_out_texts']} held-out "
                  "texts never trained on."),
        *_inputs(record.get("inputs") or {}),
        Heading("Candidates"), Table(header, rows),
        Image(plot(record, run_dir / "adapt.png").resolve(), "label-free criteria against step, one line per α"),
    )
    if record.get("budgets_not_reached"):
        doc.add(Paragraph(f"Budgets not reached (the texts ran out first): {record['budgets_not_reached']}"))
    return doc.write(run_dir, "adapt")
