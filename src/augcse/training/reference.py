"""The recipe reference (``docs/RECIPES.md``), generated from the code so it cannot drift from it.

Every table comes from what recipes are validated against: the recipe sections (a field's
meaning is its comment in :mod:`augcse.training.recipes.config`), the registered losses' declared parameters
and the view builders' signatures (types, ranges, defaults; meanings from ``Args:`` sections, roles),
the poolers, the evaluation tasks and the built-in recipes. A loss, view, task or recipe registered later appears without touching this module.

Regenerate with ``python -m augcse.training.reference > docs/RECIPES.md``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import sys
import textwrap
import tokenize
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from augcse.evaluation.tasks import SUITES, TASK_MODULES, TASKS, load_builtin_tasks
from augcse.losses import LABEL_PARAMETERS, LOSSES
from augcse.models.poolers import POOLERS
from augcse.training.recipes.config import RECIPE_DIR, Recipe, RecipeSection, TrainingRanges, builtin_recipes
from augcse.core.document import markdown_table
from augcse.core.schema import describe
from augcse.training.arguments import training_arguments
from augcse.text.views import VIEWS
from augcse.text.views.base import REMOVED
from augcse.core import yamlfile

COMMAND = "python -m augcse.training.reference > docs/RECIPES.md"
MACHINE_DEPENDENT = ("use_cpu",)  # trainer defaults that depend on the machine, left out of the table


# --------------------------------------------------------------------------- reading the code


def field_comments(cls: type) -> dict[str, str]:
    """Each dataclass field's comment: the comment lines right above it and the comment on its line."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    lines = source.splitlines()
    out: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above, line = [], node.lineno - 1
        while line >= 1 and lines[line - 1].strip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        trailing = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in comments]
        out[node.target.id] = markdown(" ".join(above + trailing))
    return out


def docstring_args(obj: Any) -> dict[str, str]:
    """The ``Args:`` section of a Google-style docstring as ``{name: text}`` (``a, b: text`` documents both)."""
    doc = inspect.getdoc(obj) or ""
    out: dict[str, str] = {}
    inside, indent, names, entry_depth = False, 0, [], 0
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            inside, indent, names = True, len(line) - len(line.lstrip()), []
            continue
        if not inside or not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        if depth <= indent:
            inside = False
            continue
        match = re.match(r"(\w+(?:, \w+)*)(?: \([^)]*\))?:\s*(.*)", stripped)
        if match and (not names or depth <= entry_depth):
            names, entry_depth = match.group(1).split(", "), depth
            out.update({name: match.group(2) for name in names})
        elif names:
            out.update({name: f"{out[name]} {stripped}".strip() for name in names})
    return {name: markdown(text) for name, text in out.items()}


def markdown(text: str) -> str:
    """reStructuredText inline markup (double backticks, ``:func:`` roles) as Markdown code spans."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text)


def summary(obj: Any) -> str:
    """The first paragraph of a docstring, on one line."""
    doc = inspect.getdoc(obj) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    return markdown(text.rstrip(":") + "." if text.endswith(":") else text)  # a formula or block followed


def references(obj: Any) -> list[str]:
    """The items of a docstring's ``References:`` section."""
    doc = inspect.getdoc(obj) or ""
    block = re.search(r"^References:\n((?:[ \t]+.*\n?)+)", doc, re.M)
    if not block:
        return []
    items = re.split(r"\n\s*- ", "\n" + textwrap.dedent(block.group(1)).strip())
    return [markdown(" ".join(item.split())) for item in items if item.strip()]


def type_name(hint: Any) -> str:

    if isinstance(hint, str):
        return hint
    text = describe(hint)
    return re.sub(r"\b(?:collections\.abc|typing|builtins)\.", "", text)


def field_hint(field: Any) -> Any:
    """A pydantic field's annotation with its constraints (``Annotated[float, Gt(0)]``)."""
    return Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation


def field_default(field: Any) -> Any:
    if field.default_factory is not None:
        return field.default_factory()
    return inspect.Parameter.empty if field.default is PydanticUndefined else field.default


def declared(fn: Callable, skip: Sequence[str]) -> type[BaseModel]:
    """What a recipe may set: a loss's declared ``Parameters``, else the keyword parameters of the signature."""
    from augcse.core.schema import signature_model

    return getattr(fn, "Parameters", None) or signature_model(fn, skip)


def value(default: Any) -> str:
    """A default as it would be written in YAML."""
    if default is inspect.Parameter.empty:
        return "*required*"
    try:
        text = yaml.safe_dump(default, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    except yaml.YAMLError:
        return f"`{default!r}`"
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return f"`{text}`"


def parameters(fn: Callable, skip: Sequence[str]) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, meaning)`` for each parameter a recipe may set."""
    target = fn.__init__ if inspect.isclass(fn) else fn
    wrapped = getattr(fn, "wraps", None)  # a library loss: its own docstrings document its parameters
    docs = {**(docstring_args(wrapped) | docstring_args(wrapped.__init__) if wrapped else {}),
            **docstring_args(fn), **(docstring_args(target) if inspect.isclass(fn) else {})}
    return [(name, type_name(field_hint(field)), value(field_default(field)), docs.get(name, ""))
            for name, field in declared(fn, skip).model_fields.items()]


def defaults(fn: Callable, skip: Sequence[str]) -> dict[str, Any]:
    return {name: default for name, field in declared(fn, skip).model_fields.items()
            if (default := field_default(field)) is not inspect.Parameter.empty}


# --------------------------------------------------------------------------- Markdown


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    rows = list(rows)
    if not rows:
        return []
    return [*markdown_table(header, rows), ""]


def qualified(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def recipe_section() -> list[str]:
    out = ["## Recipe keys", "",
           "Unknown keys and values of the wrong type or outside their range are refused before anything loads "
           "(no torch, model, spaCy pipeline or data file), in one line naming the key, with a *did you mean* for "
           "misspelt keys and names. Types are strict, as YAML writes them: `1` is not `true`, `\"1\"` is not `1`, "
           "and numbers must be finite (`.nan` and `.inf` are refused). The same schema checks a `Recipe` built "
           "in Python when it is passed to `augcse.training.run.run`. On the command line, `key.path=value` overrides any "
           "key (`data.views[0].proportion=0.5` for list items), before or after the options. The run's "
           "`recipe.yaml` is the resolved recipe: every default a loss or view fills in is written out.", ""]

    def section(cls: type, prefix: str) -> None:
        comments = field_comments(cls)
        rows, nested = [], []
        for name, f in cls.model_fields.items():
            if isinstance(f.annotation, type) and issubclass(f.annotation, RecipeSection):
                nested.append((f.annotation, f"{prefix}{name}."))
                rows.append((f"`{prefix}{name}`", "section", "", comments.get(name) or f"see `{name}` below"))
                continue
            rows.append((f"`{prefix}{name}`", type_name(field_hint(f)), value(field_default(f)),
                         comments.get(name, "")))
        title = f"`{prefix.rstrip('.')}`" if prefix else "Top level"
        out.extend([f"### {title}", "", *table(["key", "type", "default", "meaning"], rows)])
        for hint, sub in nested:
            section(hint, sub)

    section(Recipe, "")
    ranges = [f"`{name}` {type_name(field_hint(f)).removesuffix(' or null')}"
              for name, f in TrainingRanges.model_fields.items()]
    out += ["### `training`", "",
            "Any field of sentence-transformers' `SentenceTransformerTrainingArguments` (and so of "
            "transformers' `TrainingArguments`), checked against its type; `output_dir` comes from the recipe's "
            "`output_dir` and `name`. A logging backend named in `training.report_to` must be installed "
            "(`pip install 'augcse[tensorboard]'` for `tensorboard`; `pip install wandb` for `wandb`).", "",
            "Ranges checked: " + ", ".join(ranges) + "; `max_steps` is a positive integer or -1.", ""]
    changed = training_defaults()
    if changed:
        out += ["augcse's defaults where they differ from the trainer's (a recipe's `training:` keys override them; "
                "with a dev task, checkpoints are saved at each evaluation and the best one is kept):", "",
                *table(["key", "augcse default", "trainer default"], changed)]
    return out


def training_defaults() -> list[tuple[str, str, str]]:
    """The trainer arguments augcse sets for a recipe with a dev task, beside the library's own defaults."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    ours = training_arguments(Recipe(name="reference", output_dir="runs"), has_dev=True, total_steps=1000)
    theirs = SentenceTransformerTrainingArguments(output_dir="runs/reference", use_cpu=ours.use_cpu)
    rows = []
    for f in dataclasses.fields(ours):
        if f.name in MACHINE_DEPENDENT or "dir" in f.name or not f.init:
            continue
        mine, base = getattr(ours, f.name), getattr(theirs, f.name)
        if mine != base:
            rows.append((f"`{f.name}`", value(_plain(mine)), value(_plain(base))))
    return rows


def _plain(obj: Any) -> Any:
    """Enum members and other objects as their YAML-writable value."""
    obj = getattr(obj, "value", obj)
    if isinstance(obj, (list, tuple)):
        return [_plain(o) for o in obj]
    return obj if isinstance(obj, (str, int, float, bool, type(None), dict)) else str(obj)


def losses_section() -> list[str]:
    out = ["## Losses", "",
           "`loss.name` picks one; `loss.params` are its constructor's keyword parameters (`model` is supplied). "
           "**One rule for every parameter, the train-only `head` included: the loss's own default stands unless "
           "the recipe names a value** (the pooler never changes it; a recipe pooling with `cls` that wants "
           "SimCSE's MLP says `head: mlp`). "
           "A loss reads the dataset's columns by **role**: a column named like the role (or `role_2`, `role_3`… "
           "where several are allowed); a missing optional role falls back as shown (`~anchor`: a second dropout "
           "pass of the anchor).", ""]
    for name, factory in LOSSES.items():
        out += [f"### `{name}`", "", f"`{qualified(factory)}`: {summary(factory)}", ""]
        out += roles(factory, name, LABEL_PARAMETERS.get(name))
        out += table(["parameter", "type", "default", "meaning"],
                     [(f"`{n}`", t, d, m) for n, t, d, m in parameters(factory, skip=("model",))])
        cited = references(factory)
        if cited:
            out += ["References: " + "; ".join(cited), ""]
    return out


def roles(factory: Any, name: str, label_parameter: str | None) -> list[str]:
    """The roles the loss reads with its default parameters, as one line."""
    try:
        contract = factory.contract_for(defaults(factory, skip=("model",)))
    except Exception:  # a loss whose roles depend on a required parameter (e.g. a composite's terms)
        contract = None
    if contract is None or not contract.roles:
        return ["Reads: the roles its parameters name (see below).", ""]
    parts = []
    for role in contract.roles:
        text = f"`{role.name}{'…' if role.many else ''}`"
        notes = [n for n in ("optional" if not role.required and role.fallback is None else "",
                             f"else `{role.fallback}`" if role.fallback else "",
                             "" if role.from_column else "never from a column") if n]
        parts.append(text + (f" ({', '.join(notes)})" if notes else ""))
    line = "Reads (default parameters): " + ", ".join(parts)
    if contract.labels is not None:
        size = f"{contract.labels.size} classes" if contract.labels.size else "one class per augmentation"
        line += f"; `label` ({size}" + (
            f", from the view's set when `{label_parameter}` is left out" if label_parameter else "") + ")"
    return [line + ".", ""]


def views_section() -> list[str]:
    out = ["## Views", "",
           "`data.views` is a list of view builders run in order on the corpus (its `text` column), each "
           "`{name: NAME, parameter: value, …}`; with none, the dataset is the single `anchor` column.", ""]
    for name, view in VIEWS.items():
        out += [f"### `{name}`", "", f"`{qualified(view.builder)}`: {summary(view.builder)}", ""]
        try:
            written = view.outputs(defaults(view.builder, skip=("dataset", "context")))
        except Exception:  # outputs that need a required parameter
            written = None
        if written is not None:
            columns = [f"`{c}`" for c, v in written.items() if v is not REMOVED]
            verb = "Replaces the corpus with" if view.replaces else "Writes"
            out += [f"{verb} (default parameters): {', '.join(columns) or 'nothing'}.", ""]
        elif view.replaces:
            out += ["Replaces the corpus's columns.", ""]
        out += table(["parameter", "type", "default", "meaning"],
                     [(f"`{n}`", t, d, m) for n, t, d, m in parameters(view.builder, skip=("dataset", "context"))])
    return out


def poolers_section() -> list[str]:
    rows = []
    for name, pooler in POOLERS.items():
        layers = "last" if pooler.layers is None else " + ".join(
            "embeddings" if i == 0 else ("last" if i == -1 else str(i)) for i in pooler.layers)
        rows.append((f"`{name}`", pooler.mode, layers))
    return ["## Poolers", "",
            "`model.pooler` (saved in the model, so evaluation pools as training did; `null` keeps a "
            "sentence-transformers folder's own pooling). `model.normalize` keeps the backbone's modules after "
            "its pooling (e.g. `Normalize`). The pooler does not choose a train-only head: that is the loss's "
            "`head` parameter.", "",
            *table(["pooler", "pooling", "hidden states averaged"], rows)]


def tasks_section() -> list[str]:
    load_builtin_tasks()
    # the registry's order depends on which module a process imported first: the document must not
    registered = list(TASKS)

    def place(name: str) -> tuple[int, int]:
        module = type(TASKS[name]).__module__.rsplit(".", 1)[-1]
        return (TASK_MODULES.index(module) if module in TASK_MODULES else len(TASK_MODULES), registered.index(name))

    tasks = sorted(TASKS, key=place)
    suites = {s: sorted(names, key=place) for s, names in SUITES.items()}
    suites = dict(sorted(suites.items(), key=lambda item: (item[0] != "all", place(item[1][0]) if item[1] else (0, 0))))
    out = ["## Evaluation tasks", "",
           "`eval.dev` (model selection: only a task's selection score, never a test split, is read), "
           "`eval.before` and `eval.after` take a comma list of task and suite names (any case); `auto` is "
           "described under [`eval`](#eval). The same names work with `augcse eval --tasks`. "
           "`clustering:PATH` scores K-means on your own `text,label` CSV (in no suite; never a selection "
           "score).", "",
           *table(["suite", "tasks"], [(f"`{s}`", ", ".join(names)) for s, names in suites.items()]),
           *table(["task", "type", "split", "suites", "main metric", "selection metric", "what"],
                  [task_row(TASKS[name]) for name in tasks]),
           "Each task's record (`augcse.evaluation.tasks.TaskRecord`) also lists the data files it reads, each "
           "with its recorded sha256 (`src/augcse/data/checksums.sha256`) and source "
           "(`src/augcse/data/downloads.yaml`; `augcse download TASK` fetches them), and its data set's "
           "citation:", "",
           *table(["data set", "citation"], list(dict.fromkeys((TASKS[n].record.family, TASKS[n].record.citation)
                                                                for n in tasks)))]
    return out


def task_row(task: Any) -> tuple[str, ...]:
    """One row of the task table, from the task's record."""
    record = task.record
    return (f"`{record.name}`", record.type, record.split, ", ".join(record.suites), f"`{record.main_metric}`",
            f"`{record.selection_metric}`" if record.selection_metric else "—", summary(type(task)))


def recipes_section() -> list[str]:
    rows = []
    for name in builtin_recipes():
        text = (RECIPE_DIR / f"{name}.yaml").read_text(encoding="utf-8")
        comment = " ".join(line.lstrip("#").strip() for line in text.splitlines()[:8] if line.startswith("#"))
        # the first sentence; an abbreviation (App. A, Eq. 6, Fig. 5, Tab. 3) does not end it
        header = re.split(r"(?<=[.)])(?<!App\.)(?<!Eq\.)(?<!Fig\.)(?<!Tab\.)(?<!Sec\.)\s+(?=[A-Z])", comment,
                          maxsplit=1)[0]
        values = yamlfile.load(text) or {}
        loss = (values.get("loss") or {}).get("name", "simcse")
        backbone = (values.get("model") or {}).get("backbone", "")
        rows.append((f"`{name}`", f"`{loss}`", f"`{backbone}`", header))
    return ["## Built-in recipes", "",
            "`augcse train --recipe NAME` (the YAML files are in `src/augcse/training/recipes/`).", "",
            *table(["recipe", "loss", "backbone", "what"], rows)]


def reference() -> str:
    """The whole reference as Markdown."""
    parts = ["# Recipe reference", "",
             f"Generated from the code by `{COMMAND}`; do not edit by hand (a test fails when this file is "
             "out of date). A recipe is one YAML file: the model and pooler, the corpus and its cleaning, the "
             "view builders that write the columns a loss reads, the loss, the evaluation, and any trainer "
             "argument under `training:`.", "",
             "Contents: [Recipe keys](#recipe-keys) · [Losses](#losses) · [Views](#views) · [Poolers](#poolers) · "
             "[Evaluation tasks](#evaluation-tasks) · [Built-in recipes](#built-in-recipes)", ""]
    for section in (recipe_section, losses_section, views_section, poolers_section, tasks_section, recipes_section):
        parts += section()
    return "\n".join(parts).rstrip() + "\n"


def main() -> int:
    import logging

    logging.disable(logging.WARNING)  # generation must print only the document
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
