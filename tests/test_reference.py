"""docs/RECIPES.md is what ``python -m augcse.training.reference`` generates from the code, and covers it all."""

from __future__ import annotations

from pathlib import Path

import pytest

from augcse.training import reference
from augcse.training.recipes.config import DataConfig, EvalConfig, LossConfig, ModelConfig, Recipe

DOC = Path(__file__).resolve().parents[1] / "docs" / "RECIPES.md"


@pytest.fixture(scope="module")
def generated() -> str:
    return reference.reference()


def test_recipes_md_is_up_to_date(generated: str) -> None:
    assert DOC.is_file(), f"docs/RECIPES.md is missing; run: {reference.COMMAND}"
    assert DOC.read_text(encoding="utf-8") == generated, f"docs/RECIPES.md is out of date; run: {reference.COMMAND}"


@pytest.mark.parametrize("cls", [Recipe, ModelConfig, DataConfig, LossConfig, EvalConfig])
def test_every_recipe_key_says_what_it_means(cls: type) -> None:
    from augcse.training.recipes.config import RecipeSection

    comments = reference.field_comments(cls)
    undocumented = [name for name, f in cls.model_fields.items() if not comments.get(name)
                    and not (isinstance(f.annotation, type) and issubclass(f.annotation, RecipeSection))]  # sections
    assert not undocumented, f"{cls.__name__}: add a comment to {undocumented} in recipes/config.py"


def test_every_registered_name_is_in_the_reference(generated: str) -> None:
    from augcse.evaluation.tasks import TASKS, load_builtin_tasks
    from augcse.losses import LOSSES
    from augcse.models.poolers import POOLERS
    from augcse.training.recipes.config import builtin_recipes
    from augcse.text.views import VIEWS

    load_builtin_tasks()
    headings = set(generated.splitlines())
    for name in [*LOSSES, *VIEWS]:
        assert f"### `{name}`" in headings, name
    for name in [*POOLERS, *TASKS, *builtin_recipes()]:
        assert f"| `{name}` |" in generated, name


def test_a_newly_registered_loss_and_view_appear_with_their_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    from augcse.core.loss_parameters import SimCSEParameters
    from augcse.losses import LOSSES, SimCSELoss
    from augcse.text.views import VIEWS
    from augcse.text.views.base import View

    class ToyParameters(SimCSEParameters):
        margin: float = 0.25

    class ToyLoss(SimCSELoss):
        """A toy loss.

        Args:
            model: the model.
            margin: how far apart, in cosine.
        """

        Parameters = ToyParameters

    def toy_view(dataset, context, width: int = 3) -> None:
        """A toy view.

        Args:
            width: how wide.
        """

    monkeypatch.setitem(LOSSES, "toy", ToyLoss)
    monkeypatch.setitem(VIEWS, "toy_view", View(toy_view, lambda params: {"toy": None}))
    text = reference.reference()
    assert "### `toy`" in text and "| `margin` | float | `0.25` | how far apart, in cosine. |" in text
    assert "### `toy_view`" in text and "| `width` | int | `3` | how wide. |" in text
    assert "Writes (default parameters): `toy`." in text


def test_args_sections_with_several_names_and_continuation_lines() -> None:
    def fn(a: int = 1, b: int = 2, c: int = 3) -> None:
        """Summary.

        Args:
            a: first line
                continued.
            b, c: shared ``code``.

        Returns:
            nothing.
        """

    assert reference.docstring_args(fn) == {"a": "first line continued.", "b": "shared `code`.", "c": "shared `code`."}


def test_the_reference_does_not_depend_on_import_order() -> None:
    """Tasks register as their modules are imported; the document lists them in one order all the same."""
    import subprocess
    import sys

    def generated_after(modules: str) -> str:
        code = (f"import importlib\nfor m in {modules.split()!r}: importlib.import_module('augcse.evaluation.' + m)\n"
                "from augcse.training import reference\nprint(reference.reference(), end='')")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert generated_after("geometry intent clustering transfer sts") == generated_after("sts transfer")


def test_a_task_made_for_a_users_file_stays_out_of_the_registry(tmp_path, monkeypatch) -> None:
    from augcse.evaluation.tasks import SUITES, TASKS, get_task, resolve_tasks

    sample = tmp_path / "sample.csv"
    sample.write_text("text,label\na b,0\nc d,1\ni j,0\nk l,1\n")
    before = (dict(TASKS), {k: list(v) for k, v in SUITES.items()})
    assert resolve_tasks(f"clustering:{sample}") == [f"clustering:{sample}"]
    assert get_task(f"clustering:{sample}").load(None)["texts"] == ["a b", "c d", "i j", "k l"]
    assert (dict(TASKS), {k: list(v) for k, v in SUITES.items()}) == before
    assert str(sample) not in reference.reference()
    # the same relative name from another folder is that folder's file, not the first one seen
    other = tmp_path / "other"
    other.mkdir()
    (other / "sample.csv").write_text("text,label\ne f,0\ng h,1\nm n,0\no p,1\n")
    monkeypatch.chdir(tmp_path)
    assert get_task("clustering:sample.csv").load(None)["texts"] == ["a b", "c d", "i j", "k l"]
    monkeypatch.chdir(other)
    assert get_task("clustering:sample.csv").load(None)["texts"] == ["e f", "g h", "m n", "o p"]
