"""Every ``Example::`` of the public API's docstrings and every Python block of the README runs offline.

The examples load ``sentence-transformers/all-MiniLM-L6-v2`` with :func:`augcse.load_model`, which
resolves the packaged copy. :func:`augcse.load_model`'s own example runs on that real model; the others
run with ``load_model`` answering a tiny random model of the same tokenizer, so a whole training step
and an STS evaluation take a second, while the code of the example is exactly what a user runs.
"""

from __future__ import annotations

import doctest
import inspect
import re
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLE_HEADING = re.compile(r"^\s*Examples?:(:)?\s*$")


def public_objects() -> dict[str, object]:
    """The documented public API: load_model, every registered loss and view, the evaluation API."""
    import augcse
    from augcse import losses
    from augcse.text import views
    from augcse.evaluation import suite

    objects: dict[str, object] = {"augcse.load_model": augcse.load_model}
    for module in (losses, views):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                objects[f"{module.__name__}.{name}"] = obj
    objects.update({f"augcse.losses.LOSSES[{n!r}]": f for n, f in losses.LOSSES.items()})
    objects.update({f"augcse.text.views.VIEWS[{n!r}]": v.builder for n, v in views.VIEWS.items()})
    for name in ("run_tasks", "main_scores", "SuiteEvaluator"):
        objects[f"augcse.evaluation.suite.{name}"] = getattr(suite, name)
    return objects


def examples(doc: str) -> list[str]:
    """The literal blocks of a docstring's ``Example::`` (or ``Example:`` then ``::``) sections, dedented."""
    lines, out, i = doc.splitlines(), [], 0
    while i < len(lines):
        heading, base = EXAMPLE_HEADING.match(lines[i]), _indent(lines[i])
        i += 1
        if not heading:
            continue
        if not heading.group(1):  # "Example:" then a "::" line
            j = i
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j >= len(lines) or lines[j].strip() != "::":
                continue
            base, i = _indent(lines[j]), j + 1
        block = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
            block.append(lines[i])
            i += 1
        code = textwrap.dedent("\n".join(block)).strip()
        if code:
            out.append(code + "\n")
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def readme_blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return [textwrap.dedent(block) for block in blocks]


def collected() -> list[tuple[str, str]]:
    cases = []
    for name, obj in public_objects().items():
        doc = inspect.getdoc(obj) or ""
        for n, code in enumerate(examples(doc)):
            cases.append((f"{name}#{n}", code))
        if ">>>" in doc:  # doctest-style examples run as a script (outputs become comments)
            cases.append((f"{name}#doctest", doctest.script_from_examples(doc)))
    cases += [(f"README.md#{n}", code) for n, code in enumerate(readme_blocks())]
    return list(dict((code, (name, code)) for name, code in cases).values())  # a class listed twice runs once


CASES = collected()


def documented() -> dict[str, object]:
    """What must carry an example: load_model, the evaluation API and every registered loss."""
    import augcse
    from augcse.evaluation.suite import SuiteEvaluator, run_tasks
    from augcse.losses import LOSSES

    return {"load_model": augcse.load_model, "run_tasks": run_tasks, "SuiteEvaluator": SuiteEvaluator,
            **{f"loss {name}": factory for name, factory in LOSSES.items()}}


@pytest.mark.parametrize("name", documented())
def test_has_an_example(name: str) -> None:
    obj = documented()[name]
    assert examples(inspect.getdoc(obj) or ""), f"{obj.__qualname__} has no Example:: section in its docstring"


def test_the_readme_has_a_python_example() -> None:
    assert readme_blocks()


def test_no_example_loads_a_model_by_hub_name_directly() -> None:
    for name, code in CASES:
        assert not re.search(r"SentenceTransformer\(\s*[\"']", code), f"{name}: use augcse.load_model(...)"


@pytest.fixture(scope="module")
def tiny_loader(tiny_model_dir: Path):
    """``load_model`` answering the tiny model for the packaged model's name."""
    from augcse.commands.encode import load_model
    from augcse.models.poolers import build_sentence_transformer

    def load(name_or_path: str, pooler: str | None = None):
        if name_or_path == "sentence-transformers/all-MiniLM-L6-v2":
            return build_sentence_transformer(str(tiny_model_dir), pooler or "avg", max_seq_length=32)
        return load_model(name_or_path, pooler)

    return load


@pytest.mark.parametrize(("name", "code"), CASES, ids=[name for name, _ in CASES])
def test_example_runs(name: str, code: str, tiny_loader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import augcse.commands.encode

    monkeypatch.chdir(tmp_path)  # the trainer writes its default output folder here
    if name.split("#")[0] != "augcse.load_model":
        monkeypatch.setattr(augcse.commands.encode, "load_model", tiny_loader)
    exec(compile(code, name, "exec"), {"__name__": f"example:{name}"})
