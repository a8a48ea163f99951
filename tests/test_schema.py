"""One validation schema: every setting refused in one line by the same fields, before anything heavy loads."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
import yaml

from augcse.commands.main import main
from augcse.training.recipes.config import DataConfig, LossConfig, Recipe, RecipeError, load_recipe

SRC = Path(__file__).resolve().parents[1] / "src" / "augcse"


@pytest.fixture()
def recipe(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """A valid recipe whose corpus does not exist: anything that got past validation would fail differently."""
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({
        "name": "schema", "output_dir": str(tmp_path / "runs"),
        "model": {"backbone": str(tiny_model_dir), "pooler": "avg"},
        "data": {"corpus": str(tmp_path / "corpus.txt"), "views": [{"name": "sda", "proportion": 0.5}]},
        "loss": {"name": "sda", "params": {"temperature": 0.05}},
        "eval": {"dev": None, "before": None, "after": None},
        "training": {"per_device_train_batch_size": 8, "max_steps": 2},
    }))
    return path


def _refuse(argv: list[str], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the CLI; no model may load; one stderr line, exit 2. Returns the line."""
    import augcse.training.build

    monkeypatch.setattr(logging.root, "handlers", [logging.NullHandler()])
    monkeypatch.setattr(augcse.training.build, "build_model", lambda recipe: pytest.fail("a model was loaded"))
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(("override", "message"), [
    ("loss.params.temperature=-1", "recipe key 'loss.params.temperature' must be > 0, got -1"),
    ("loss.params.temperature=.nan", "recipe key 'loss.params.temperature' must be a finite number, got nan"),
    ("loss.params.temperature=.inf", "recipe key 'loss.params.temperature' must be a finite number, got inf"),
    ("training.learning_rate=-1", "recipe key 'training.learning_rate' must be > 0, got -1"),
    ("data.limit=0", "recipe key 'data.limit' must be > 0, got 0"),
    ("data.views[0].proportoin=0.5", "unknown recipe key 'data.views[0].proportoin' (did you mean 'proportion'?)"),
    ("loss.params.head=mpl", "recipe key 'loss.params.head' must be one of 'none', 'mlp', 'bn', 'vascl', 'sccl' "
                             "(did you mean 'mlp'?), got 'mpl'"),
    ("loss.params.margin=-1", "recipe key 'loss.params.margin' must be >= 0, got -1"),
    ("data.shuffle=1", "recipe key 'data.shuffle' must be true or false, got 1"),
    ("data.limit='5'", "recipe key 'data.limit' must be an integer, got '5'"),
])
def test_a_bad_value_exits_2_in_one_line_before_any_model_loads(recipe, tmp_path, override, message, capsys,
                                                                monkeypatch) -> None:
    line = _refuse(["train", str(recipe), override], capsys, monkeypatch)
    assert line == f"augcse train: error: {message}" or line.startswith(f"augcse train: error: {message}"), line
    assert not (tmp_path / "runs").exists()  # nothing written


def test_refusals_import_neither_torch_nor_sentence_transformers(tmp_path: Path) -> None:
    """The schema and every declaration it reads load no torch, datasets or spaCy: a refusal costs about a second."""
    code = ("import sys\nfrom augcse.training.recipes.config import RecipeError, load_recipe\n"
            "for bad in ('loss.params.temperature=-1', 'loss.params.head=mpl', 'training.learning_rate=-1', "
            "'data.limit=0', 'data.views=[{name: sda, proportoin: 1}]'):\n"
            "    try:\n        load_recipe(None, 'quickstart', [bad])\n    except RecipeError:\n        pass\n"
            "    else:\n        raise SystemExit('accepted ' + bad)\n"
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'spacy', 'datasets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_python_api_and_a_recipe_give_the_same_line(tiny_st) -> None:
    from augcse.losses import SDALoss, SimCSELoss, VaSCLLoss

    cases = [(SimCSELoss, "temperature", "hot", "must be a number, got 'hot'"),
             (SimCSELoss, "temperature", -1, "must be > 0, got -1"),
             (SDALoss, "margin", -1, "must be >= 0, got -1"),
             (VaSCLLoss, "topk", 0, "must be > 0, got 0")]
    for cls, key, value, wanted in cases:
        with pytest.raises(RecipeError) as python:
            cls(tiny_st, **{key: value})
        assert str(python.value) == f"{cls.__name__} parameter {key!r} {wanted}"
        name = {SimCSELoss: "simcse", SDALoss: "sda", VaSCLLoss: "vascl"}[cls]
        with pytest.raises(RecipeError) as recipe:
            load_recipe(None, "quickstart", [f"loss.name={name}", f"loss.params={{{key}: {value!r}}}"])
        assert str(recipe.value) == f"recipe key 'loss.params.{key}' {wanted}"


def test_vascl_topk_0_speaks_of_topk(tiny_st) -> None:
    from augcse.losses import VaSCLLoss

    with pytest.raises(RecipeError, match="'topk' must be > 0") as exc:
        VaSCLLoss(tiny_st, topk=0)
    assert "batch" not in str(exc.value)


def test_a_recipe_built_in_python_is_refused_by_run_as_a_file_is(tmp_path: Path) -> None:
    from augcse.training.run import run

    with pytest.raises(RecipeError) as from_file:
        load_recipe(None, "quickstart", ["loss.params.temperature=-1"])
    bad = Recipe(output_dir=str(tmp_path / "runs"), loss=LossConfig(name="simcse", params={"temperature": -1}))
    with pytest.raises(RecipeError) as from_python:
        run(bad)
    assert str(from_python.value) == str(from_file.value) == "recipe key 'loss.params.temperature' must be > 0, got -1"
    assert not (tmp_path / "runs").exists()
    with pytest.raises(RecipeError) as from_file:
        load_recipe(None, "quickstart", ["data.limit=0"])
    with pytest.raises(RecipeError) as from_python:  # a section built in Python is checked as it is built
        Recipe(data=DataConfig(limit=0))
    assert str(from_python.value) == str(from_file.value) == "recipe key 'data.limit' must be > 0, got 0"


def test_the_three_old_checkers_are_gone_and_one_module_validates() -> None:
    import augcse.text.augment.base as augment_base

    for module in ("augcse.signatures", "augcse.training.recipes.checks"):
        with pytest.raises(ModuleNotFoundError):
            __import__(module)
    assert not hasattr(augment_base, "check_param") and not hasattr(augment_base, "PARAM_RANGES")
    catching = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "ValidationError" in p.read_text())
    assert catching == ["core/schema.py"]


@pytest.mark.parametrize(("text", "message"), [
    ("", "is empty"),
    ("# only a comment\n", "is empty"),
    ("- name: x\n", "must be a mapping of keys (name:, model:, data:, loss:…), got a list"),
])
def test_an_empty_or_list_recipe_file_is_refused(tmp_path, text, message, capsys, monkeypatch) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    line = _refuse(["train", str(path), "name=x"], capsys, monkeypatch)
    assert message in line and "Traceback" not in line


def test_overrides_after_an_option_are_accepted(recipe, monkeypatch) -> None:
    import augcse.training.run

    seen = {}
    monkeypatch.setattr(augcse.training.run, "run", lambda r, data_dir, resume, overwrite: seen.update(
        recipe=r, overwrite=overwrite) or {})
    assert main(["train", str(recipe), "--overwrite", "name=x", "seed=3"]) == 0
    assert seen["recipe"].name == "x" and seen["recipe"].seed == 3 and seen["overwrite"]
    assert main(["train", "--overwrite", "--recipe", "quickstart", "--data-dir", "/nowhere", "name=y"]) == 0
    assert seen["recipe"].name == "y"


@pytest.mark.parametrize("argv", [["--recipe", "quickstart", "training.learning_rate"],
                                  ["training.learning_rate"], ["RECIPE", "--overwrite", "name"]])
def test_an_override_without_equals_is_a_bad_override(recipe, argv, capsys, monkeypatch) -> None:
    argv = [str(recipe) if a == "RECIPE" else a for a in argv]
    line = _refuse(["train", *argv], capsys, monkeypatch)
    assert "must look like key.path=value" in line, line


@pytest.mark.parametrize(("args", "message"), [(["--threads", "0"], "--threads 0: must be a positive integer"),
                                               (["--stage", "middle"], "--stage middle: must be before or after")])
def test_eval_refuses_threads_0_and_an_unknown_stage(args, message, capsys, monkeypatch) -> None:
    line = _refuse(["eval", "some-model", *args], capsys, monkeypatch)
    assert message in line, line


def test_augmentation_parameters_are_sections_too() -> None:
    from augcse.text.augment import get

    with pytest.raises(RecipeError, match=r"^RandomSwap parameter 'p' must be <= 1, got 1.5$"):
        get("RandomSwap", p=1.5)
    with pytest.raises(RecipeError, match=r"^unknown RandomSwap parameter 'pp' \(did you mean 'p'\?\)"):
        get("RandomSwap", pp=0.5)
    assert get("RandomSwap", p=1).params["p"] == 1.0  # an integer is a number


def test_registry_names_known_without_torch_match_the_registries() -> None:
    from augcse.core.loss_parameters import LOSS_PARAMETERS, HeadName
    from augcse.losses import LOSSES
    from augcse.losses.heads import HEADS
    from augcse.models.poolers import POOLERS
    from augcse.training.recipes.config import PoolerName

    assert list(get_args(PoolerName)) == list(POOLERS)
    assert list(get_args(HeadName)) == list(HEADS)
    assert set(LOSS_PARAMETERS) == set(LOSSES)
    for name, declared in LOSS_PARAMETERS.items():
        assert declared is None or LOSSES[name].Parameters is declared, name


# --------------------------------------------------------------------------- every effective value visible

REQUIRED_VIEW_PARAMETERS = {"columns": {"path": "x.csv", "columns": {"anchor": "a"}}}


def test_cards_minilm_names_its_head_and_every_recipe_keeps_the_head_it_had() -> None:
    resolved = yaml.safe_load(load_recipe(None, "cards-minilm").to_yaml())
    assert resolved["loss"]["params"]["head"] == "none"
    assert resolved["model"]["normalize"] is True
    # the heads the built-in recipes trained with when the pooler chose it (cls: mlp, others: none)
    for name, head in {"simcse-bert-base": "mlp", "simcse-roberta-base": "mlp", "quickstart": "none",
                       "simcse-minilm": "none", "cards-roberta-base": "mlp", "sda-minilm": "bn"}.items():
        assert load_recipe(None, name).loss.params["head"] == head, name


def test_the_loss_default_head_stands_whatever_the_pooler(tiny_st) -> None:
    from augcse.training.build import build_loss

    for pooler in ("cls", "avg"):
        recipe = Recipe(model={"pooler": pooler}, loss=LossConfig(name="cards"))
        assert build_loss(recipe, tiny_st).head_name == "mlp"


def _declared(parameters) -> set[str]:
    return set(parameters.model_fields)


@pytest.mark.parametrize("name", sorted(p.stem for p in (SRC / "recipes").glob("*.yaml")))
def test_every_effective_default_is_in_the_resolved_recipe(name: str) -> None:
    from augcse.losses import LOSSES
    from augcse.text.views import view_parameters

    resolved = yaml.safe_load(load_recipe(None, name).to_yaml())
    loss = resolved["loss"]
    assert _declared(LOSSES[loss["name"]].Parameters) <= set(loss["params"]), name
    for term in loss["params"].get("terms", []):
        assert _declared(LOSSES[term["loss"]].Parameters) <= set(term["params"]), (name, term["loss"])
        assert {"name", "weight", "inputs"} <= set(term)
    for view in resolved["data"]["views"]:
        assert _declared(view_parameters(view["name"])) <= set(view), (name, view["name"])
    assert set(Recipe.model_fields) <= set(resolved)


def test_every_registered_loss_and_view_fills_every_default() -> None:
    from augcse.losses import LOSSES, validate_loss
    from augcse.text.views import VIEWS, view_parameters
    from augcse.text.views import validate_view_specs

    minimal = {"composite": {"terms": [{"loss": "simcse"}]}, "augcse": {"augmentations": 2}}
    for name, cls in LOSSES.items():
        filled = validate_loss(name, minimal.get(name, {}))
        assert set(filled) == _declared(cls.Parameters), name
    for name in VIEWS:
        [filled] = validate_view_specs([{"name": name, **REQUIRED_VIEW_PARAMETERS.get(name, {})}])
        assert set(filled) == {"name", *_declared(view_parameters(name))}, name


def test_a_loss_registered_later_is_checked_like_the_others() -> None:
    from augcse.core.loss_parameters import LOSS_PARAMETERS
    from augcse.losses import LOSSES, SimCSELoss, register_loss

    register_loss("simcse-copy", SimCSELoss)
    try:
        assert load_recipe(None, "quickstart", ["loss.name=simcse-copy"]).loss.params["head"] == "none"
        with pytest.raises(RecipeError, match=r"^recipe key 'loss.params.temperature' must be > 0, got -1$"):
            load_recipe(None, "quickstart", ["loss.name=simcse-copy", "loss.params.temperature=-1"])
    finally:
        LOSSES.pop("simcse-copy")
        LOSS_PARAMETERS.pop("simcse-copy")


# checks across fields (pydantic model validators): the line names the fields the check read, not the section
ACROSS_FIELDS = [
    (["loss.name=cards", "loss.params={symmetric: true}"],
     "recipe keys 'loss.params.symmetric' and 'loss.params.mask_own_text': the symmetric form has no own-text mask"),
    (["eval.after=null", "eval.budgets=[2]"],
     "recipe keys 'eval.budgets' and 'eval.after': budgets are scored on the 'after' tasks"),
    (["loss.name=composite", "loss.params={terms: [{loss: simcse}, {loss: sda, params: {mini_batch_size: 4}}]}"],
     "recipe key 'loss.params.terms[1].params.mini_batch_size': the terms share one embedding pass"),
]


@pytest.mark.parametrize(("overrides", "message"), ACROSS_FIELDS)
def test_a_check_across_fields_names_its_recipe_keys(overrides, message) -> None:
    with pytest.raises(RecipeError) as refused:
        load_recipe(None, "quickstart", overrides)
    assert str(refused.value).startswith(message), str(refused.value)


def test_a_check_across_fields_names_its_parameters_in_python(tiny_st) -> None:
    from augcse.losses import CARDSLoss, CompositeLoss
    from augcse.training.recipes.config import EvalConfig

    with pytest.raises(RecipeError, match=r"^CARDSLoss parameters 'symmetric' and 'mask_own_text': the symmetric"):
        CARDSLoss(tiny_st, symmetric=True)
    with pytest.raises(RecipeError, match=r"^CompositeLoss parameter 'terms\[0\]\.params\.mini_batch_size': the terms"):
        CompositeLoss(tiny_st, terms=[{"loss": "simcse", "params": {"mini_batch_size": 4}}])
    with pytest.raises(RecipeError, match=r"^recipe keys 'eval\.budgets' and 'eval\.after': budgets are scored"):
        EvalConfig(after=None, budgets=[3])


def test_a_check_across_fields_without_named_fields_never_shows_an_empty_key() -> None:
    from pydantic import model_validator

    from augcse.core.schema import Section, validate

    class Pair(Section):
        low: int = 0
        high: int = 1

        @model_validator(mode="after")
        def _ordered(self) -> Pair:
            if self.low > self.high:
                raise ValueError("low is above high")
            return self

    with pytest.raises(RecipeError) as refused:
        validate(Pair, {"low": 2}, subject="Pair parameter")
    assert str(refused.value) == "Pair: low is above high"
