"""The model card of a trained model (``final/README.md``), built with sentence-transformers' own card.

sentence-transformers fills its :class:`SentenceTransformerModelCardData` while the trainer runs (loss
and its parameters, hyper-parameters, training logs, library versions). What it cannot know is set here
before the card is rendered again: the base model (the recipe's backbone, which was loaded from a local
copy), the corpus actually used with its counts, every score of the after-training evaluation as a
``model-index`` entry with its task type, metric and scale (read from the task's record), and widget
examples from STS-B dev sentence pairs instead of raw corpus lines. An augcse section follows with
before/after scores and the recipe.
"""

from __future__ import annotations

import csv
import gzip
import html
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from augcse.assets.resolve import AssetError, resolve_data
from augcse.core.outputs import write_text_atomically

if TYPE_CHECKING:  # the card is written after training; importing this module stays light
    from torch import nn

    from augcse.training.recipes.config import Recipe

STSB_DEV = "sts/original/STSBenchmark/stsbenchmark/sts-dev.csv"  # widget sentences (embedded copy)
WIDGET_PAIRS = 3
# what the card says the scores were computed with (sentence-transformers would name the stand-in class)
EVALUATED_WITH = "<code>augcse eval</code> (<code>augcse.evaluation.suite.run_tasks</code>)"


@dataclass(frozen=True)
class TaskScore:
    """One evaluated task, shaped like a sentence-transformers evaluator for the card's ``model-index``."""

    name: str
    description: str
    primary_metric: str

    def get_config_dict(self) -> dict[str, Any]:
        return {}


def task_kind(task: str) -> tuple[str, str, float]:
    """``(model-index task type, metric, scale)`` from the task's record; a name the registry does not
    hold (a user's ``clustering:PATH``) is a generic score, as saved."""
    from augcse.evaluation.tasks import TASKS, load_builtin_tasks

    load_builtin_tasks()
    if task not in TASKS:
        return "Evaluation", "score", 1.0
    record = TASKS[task].record
    return record.kind.description, record.kind.metric, record.scale


def eval_results(after: dict[str, float]) -> dict[TaskScore, dict[str, float]]:
    """Every task's main score (suite averages left out: they are no dataset) as evaluator results."""
    from augcse.evaluation.tasks import is_average

    results: dict[TaskScore, dict[str, float]] = {}
    for task, value in after.items():
        if is_average(task) or "/" in task:
            continue
        description, metric, scale = task_kind(task)
        key = f"{task}_{metric}"
        results[TaskScore(task, description, key)] = {key: round(value / scale, 4)}
    return results


def widget_examples(data_dir: Path | None = None) -> list[dict[str, Any]]:
    """STS-B dev pairs as widget entries: a sentence, its paraphrase and an unrelated sentence."""
    try:
        path = resolve_data(STSB_DEV, data_dir, download=False)
    except AssetError:
        return []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        rows = [r for r in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE) if len(r) >= 7]
    close = [r for r in rows if float(r[4]) >= 4.0 and 6 <= len(r[5].split()) <= 20]
    far = [r for r in rows if float(r[4]) <= 1.0 and 6 <= len(r[6].split()) <= 20]
    return [{"source_sentence": a[5], "sentences": [a[6], b[6]]} for a, b in zip(close[:WIDGET_PAIRS], far)]


def card_data(final: Path, recipe: Recipe, scores: dict, summary: dict, loss: nn.Module) -> Any:
    """The model's card data with what only the run knows filled in."""
    data = loss.model.model_card_data
    data.local_files_only = True  # never look the base model or datasets up on the Hub here
    backbone = recipe.model.backbone
    if not Path(backbone).expanduser().exists():
        data.base_model, data.base_model_revision = backbone, None
    data.model_name = f"{recipe.name}: {type(loss).__name__} on {Path(backbone).name}"
    data.set_language("en")
    data.add_tags(["augcse", f"augcse:{recipe.loss.name}", "unsupervised"])
    corpus = Path(summary.get("corpus") or recipe.data.corpus)
    trained = data.train_datasets[0] if data.train_datasets else {}  # filled by the trainer when it ran
    data.train_datasets = [{"columns": [recipe.data.column], "loss": loss_entry(loss), **trained,
                            "name": corpus.name, "size": summary.get("train_rows")}]
    data.eval_datasets = []
    data.set_losses([loss])
    data.eval_results_dict = eval_results(scores.get("after") or {})
    if summary.get("best_step") is not None:
        data.set_best_model_step(summary["best_step"])
    widget = widget_examples()
    if widget:
        data.widget = widget
        first = widget[0]
        data.usage_examples = [first["source_sentence"], *first["sentences"]]
    data.save_dir = str(final)
    data._snippet_default_model_id = str(final)  # the usage example loads this folder until it is on the Hub
    exact_training_losses(data, Path(final).parent / "log.jsonl")
    return data


def exact_training_losses(data: Any, log: Path) -> None:
    """The card's training-loss column from ``log.jsonl`` at 4 significant digits.

    The trainer rounds the loss to 4 decimals, so a contrastive loss of 1e-5 would read 0.0000.
    """
    if not log.is_file():
        return
    losses: dict[int, float] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a kill
            continue
        if isinstance(record, dict) and isinstance(record.get("loss"), (int, float)) and "step" in record:
            losses[int(record["step"])] = float(record["loss"])
    for row in data.training_logs:
        if row.get("Step") in losses and "Training Loss" in row:
            row["Training Loss"] = f"{losses[row['Step']]:.4g}"


def loss_entry(loss: nn.Module) -> dict[str, str]:
    """The loss as the card's dataset section shows it: class path and parameters."""
    config = json.dumps(loss.get_config_dict(), indent=4, default=str)
    return {"fullname": f"{type(loss).__module__}.{type(loss).__name__}",
            "config_code": textwrap.indent(f"```json\n{config}\n```", "  ")}


def augcse_section(recipe: Recipe, scores: dict, summary: dict, loss: nn.Module) -> str:
    """Markdown: data actually used, kept step, scores before and after, the recipe."""
    stats = summary.get("corpus_stats") or {}
    counts = ", ".join(f"{k.replace('_', ' ')} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in stats.items()
                       if not isinstance(v, dict))
    skipped = stats.get("skipped") if isinstance(stats.get("skipped"), dict) else {}
    lines = ["", "## augcse run", "",
             f"- **Recipe:** `{recipe.name}`, loss `{recipe.loss.name}` "
             f"({type(loss).__module__}.{type(loss).__name__})",
             f"- **Corpus used:** `{summary.get('corpus', recipe.data.corpus)}`"
             + (f" ({counts})" if counts else ""),
             ]
    if skipped:
        lines.append("- **Lines skipped:** " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in skipped.items()))
    lines.append(f"- **Training rows:** {summary.get('train_rows', '—')}; steps: {summary.get('global_step', '—')}")
    if summary.get("best_step") is not None:
        lines.append(f"- **Kept checkpoint:** step {summary['best_step']} (dev score {summary.get('best_metric'):.4f})")
    else:
        lines.append("- **Kept model:** the last step (no dev task selected a checkpoint)")
    if summary.get("seconds") is not None:
        from augcse.report.run_report import run_time

        lines.append(f"- **Run time:** {run_time(summary['seconds'])}")
    lines += ["", "### Scores (×100; STS: Spearman of cosine similarities)", "", score_markdown(scores), "",
              "### Recipe", "", "```yaml", recipe.to_yaml().rstrip(), "```", ""]
    return "\n".join(lines)


def score_markdown(scores: dict) -> str:
    """Scores before/after with Δ; a suite "average" of a single task is left out (it repeats the task)."""
    from augcse.evaluation.tasks import is_average
    from augcse.report.run_report import single_task_averages_dropped

    scores = {stage: single_task_averages_dropped(values) for stage, values in scores.items()
              if isinstance(values, dict)}
    stages = [s for s in ("before", "after") if scores.get(s)]
    if not stages:
        return "No evaluation was run."
    tasks = list(dict.fromkeys(t for s in stages for t in scores[s]))
    header = "| task | " + " | ".join(stages) + (" | Δ |" if len(stages) == 2 else " |")
    rule = "|---|" + "---:|" * (len(stages) + (len(stages) == 2))
    rows = []
    for task in tasks:
        values = [scores[s].get(task) for s in stages]
        cells = ["—" if v is None else f"{v:.2f}" for v in values]
        if len(stages) == 2:
            cells.append("—" if None in values else f"{values[1] - values[0]:+.2f}")
        name = f"**{task}**" if is_average(task) else task
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join([header, rule, *rows])


def write_model_card(final: Path, recipe: Recipe, scores: dict, summary: dict, loss: nn.Module) -> None:
    """Write ``final/README.md``: sentence-transformers' card completed with the run, then the augcse section."""
    from sentence_transformers.base.model_card import generate_model_card

    card_data(final, recipe, scores, summary, loss)
    text = generate_model_card(loss.model).replace(f"<code>{TaskScore.__module__}.{TaskScore.__qualname__}</code>",
                                                   EVALUATED_WITH)
    # replaces the card sentence-transformers wrote, never writing through a link in its place
    write_text_atomically(Path(final) / "README.md",
                          text.rstrip("\n") + "\n" + augcse_section(recipe, scores, summary, loss))


def render_html(markdown_text: str) -> str:
    """The card as a self-contained HTML page, for checking it in a browser before it is shared.

    The YAML front matter (the Hub's metadata: tags, base model, widget, model-index) is shown in a box
    above the rendered Markdown, as the Hub's metadata view shows it; the Markdown is rendered with
    tables and fenced code (nested in list items too: CommonMark, as the Hub), and the card's HTML
    comments stay hidden.
    """
    from markdown_it import MarkdownIt

    front, body = "", markdown_text
    if markdown_text.startswith("---\n"):
        front, _, body = markdown_text[4:].partition("\n---\n")
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(body)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{CARD_CSS}</style></head><body>"
            f"<div class='meta'><div class='meta-title'>metadata (YAML front matter)</div>"
            f"<pre>{html.escape(front)}</pre></div>{rendered}</body></html>")


CARD_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 900px; margin: 1.5em auto;
       padding: 0 1em; color: #1f2328; line-height: 1.5; font-size: 15px; }
h1, h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; } h1 { font-size: 1.8em; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; font-size: 12.5px; border-radius: 6px; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 90%; }
table { border-collapse: collapse; margin: .6em 0; } td, th { border: 1px solid #d1d9e0; padding: 4px 10px; }
th { background: #f6f8fa; } tr:nth-child(even) td { background: #fafbfc; }
.meta { border: 1px solid #d1d9e0; border-radius: 6px; margin-bottom: 1.5em; }
.meta-title { background: #f6f8fa; padding: .4em .8em; font-size: 13px; color: #59636e;
              border-bottom: 1px solid #d1d9e0; }
.meta pre { margin: 0; background: #fff; columns: 2; column-gap: 2em; font-size: 11.5px; }
"""
