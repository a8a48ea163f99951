"""Every ``augcse reproduce`` row trains what its paper states: the resolved recipe (built-in recipe plus the
row's overrides) against ``data/paper_settings.yaml``, a deviation only with its recorded reason."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from augcse.studies import paper_settings
from augcse.training.recipes.config import RECIPE_DIR, builtin_recipes
from augcse.studies.reproduce import papers, resolved

ROWS = [(paper.name, row) for paper in papers().values() for row in (*paper.rows, *paper.checkpoints)]


@pytest.mark.parametrize(("paper", "row"), ROWS, ids=[f"{p}/{r.name}" for p, r in ROWS])
def test_row_resolves_to_the_papers_settings(paper, row):
    findings = paper_settings.check(paper, row.name, resolved(row))
    assert not findings, "\n".join(map(str, findings))
    if not row.trained:  # an evaluated model: which model and which pooler, each with its status
        assert not paper_settings.unrecorded(paper, row.name, resolved(row))
        assert {"evaluate.model", "evaluate.pooler"} <= {s.key for s in paper_settings.settings(paper, row.name)}


@pytest.mark.parametrize(("paper", "row"), [(p, r) for p, r in ROWS if r.trained],
                         ids=[f"{p}/{r.name}" for p, r in ROWS if r.trained])
def test_every_effective_key_of_every_trained_row_has_a_status(paper, row):
    """Completeness: every leaf of the resolved recipe (the trainer's effective arguments included), bar the
    exempt ones, is stated by the paper, taken from the authors' code, open, or a deviation."""
    values = resolved(row)
    assert not paper_settings.unrecorded(paper, row.name, values), \
        f"{paper}/{row.name}: no status for {paper_settings.unrecorded(paper, row.name, values)}"
    keys = set(paper_settings.leaf_keys(values))
    assert {"training.lr_scheduler_type", "training.optim", "training.warmup_steps",
            "model.max_seq_length", "data.dedupe", "data.fallback"} <= keys  # the trainer's defaults are in
    # τ: the loss's own, or a composite term's; the original CT's binary cross-entropy has none
    if values["loss"]["name"] != "ct_original":
        assert any(k.startswith("loss.params.") and k.endswith("params.temperature") for k in keys)


def test_a_key_removed_from_the_table_fails_completeness(monkeypatch):
    """The completeness check is real: CARDS-base without its learning-rate status is caught by name."""
    table = copy.deepcopy(paper_settings._table())
    del table["profiles"]["cards-base"]["training.learning_rate"]
    monkeypatch.setattr(paper_settings, "_table", lambda: table)
    row = {r.name: r for r in papers()["cards"].rows}["roberta-base"]
    assert paper_settings.unrecorded("cards", "roberta-base", resolved(row)) == ["training.learning_rate"]


def test_an_exempt_key_must_name_no_value():
    """Exemptions are outputs, cadence, workers and memory only."""
    exempt = set(paper_settings.exempt())
    assert not exempt & {"training.learning_rate", "data.corpus", "loss.params.temperature", "model.pooler"}
    assert paper_settings.is_exempt("data.views[0].n_process") and paper_settings.is_exempt("data.views[3].positive_column")
    assert not paper_settings.is_exempt("data.views[0].p")


def test_table_has_no_row_that_reproduce_lacks():
    listed = {(paper, row) for paper, rows in paper_settings._table()["papers"].items() for row in rows}
    assert listed == {(paper, row.name) for paper, row in ROWS}


def test_changing_a_stated_value_fails():
    """The check is real: VaSCL's SimCSE baseline back at SimCSE's 1e-5, or VaSCL without the authors'
    deduplication, is caught and named with its source."""
    rows = {row.name: row for row in papers()["vascl"].rows}
    values = resolved(rows["simcse-roberta-base"])
    values["training"]["learning_rate"] = 1.0e-5
    (finding,) = paper_settings.check("vascl", "simcse-roberta-base", values)
    assert str(finding) == ("vascl/simcse-roberta-base: training.learning_rate is 1.0e-05, not the paper's 3.0e-05 "
                            "(VaSCL App. A ('3e-05 for optimizing the contrastive learning head and the backbone'))")
    values = resolved(rows["roberta-base"])
    values["data"]["dedupe"] = False
    (finding,) = paper_settings.check("vascl", "roberta-base", values)
    assert finding.setting.key == "data.dedupe" and "the authors' code's true" in str(finding)
    # a recorded deviation holds the recipe to ours: VaSCL's uniform start may not silently change either
    values = resolved(rows["roberta-base"])
    values["loss"]["params"]["noise"] = "gaussian"
    (finding,) = paper_settings.check("vascl", "roberta-base", values)
    assert "not ours (a recorded deviation) uniform" in str(finding)


def test_the_rows_of_the_second_reading_are_fixed():
    rows = {(paper.name, row.name): row for paper in papers().values() for row in paper.rows}
    lrs = {name: resolved(rows["cards", name])["training"]["learning_rate"]
           for name in ("roberta-base", "switch-case-only-roberta-base", "retrieval-only-roberta-base",
                        "roberta-large", "switch-case-only-roberta-large", "retrieval-only-roberta-large")}
    assert lrs == {"roberta-base": 4.0e-5, "switch-case-only-roberta-base": 4.0e-5,
                   "retrieval-only-roberta-base": 4.0e-5, "roberta-large": 7.5e-6,
                   "switch-case-only-roberta-large": 7.5e-6, "retrieval-only-roberta-large": 7.5e-6}
    kinds = {s.key: s.kind for s in paper_settings.settings("cards", "roberta-base")}
    assert kinds["training.learning_rate"] == "code"
    for name in ("roberta-base", "distilroberta", "roberta-large", "simcse-roberta-base", "simcse-distilroberta",
                 "simcse-roberta-large"):
        values = resolved(rows["vascl", name])
        assert values["data"]["dedupe"] is True, name
        assert values["training"]["lr_scheduler_type"] == "constant", name
    for name in ("simcse-roberta-base", "simcse-distilroberta", "simcse-roberta-large"):
        assert resolved(rows["vascl", name])["loss"]["params"]["symmetric"] is True
    for name in ("roberta-large", "retrieval-only-roberta-base"):
        assert resolved(rows["cards", name])["data"]["views"][0]["retrieval_max_seq_length"] == 32
    kinds = {s.key: s.kind for s in paper_settings.settings("cards", "roberta-large")}
    assert kinds["data.views[0].variant"] == "deviation"
    for paper, row in (("augcse", "bert-base"), ("sda", "pi-bert-base"), ("vascl", "roberta-base")):
        deviating = {s.key for s in paper_settings.deviations(paper, row)}
        assert deviating & {"data.views[0].augmentations", "data.views[0].variant", "loss.params.noise"}
    assert {row.name for row in papers()["cards"].checkpoints} == {"released-roberta-base", "released-roberta-large"}
    assert "cards/released-roberta-base" not in rows["cards", "roberta-base"].published


def test_a_setting_needs_its_source_or_reason(monkeypatch):
    for spec, message in (({"paper": 1.0, "source": "§1", "ours": 2.0}, "needs ours and reason"),
                          ({"code": 1.0}, "needs its source"),
                          ({"open": 1.0}, "open and reason only"),
                          ({"paper": 1.0, "code": 1.0, "source": "§1"}, "exactly one of paper, code or open")):
        bad = {"profiles": {}, "papers": {"x": {"r": {"training.learning_rate": spec}}}}
        monkeypatch.setattr(paper_settings, "_table", lambda: bad)
        with pytest.raises(ValueError, match=message):
            paper_settings.settings("x", "r")


def test_lookup_reads_nested_keys_and_list_items():
    values = {"data": {"views": [{"p": 0.1}]}, "training": {}}
    assert paper_settings.lookup(values, "data.views[0].p") == 0.1
    assert paper_settings.lookup(values, "data.views[1].p") is paper_settings.MISSING
    assert paper_settings.lookup(values, "training.learning_rate_mapping") is paper_settings.MISSING


@pytest.mark.parametrize("name", builtin_recipes())
def test_recipe_description_ends_its_sentence(name):
    """The recipe reference shows each recipe's first sentence: it is never cut at an abbreviation."""
    from augcse.training.reference import recipes_section

    (line,) = [line for line in recipes_section() if line.startswith(f"| `{name}` |")]
    description = line.rstrip(" |").rsplit(" | ", 1)[-1]
    assert re.search(r"[.)]$", description) and not re.search(r"\b(App|Eq|Fig|Tab|Sec)\.$", description), description
    comment = yaml.safe_load((RECIPE_DIR / f"{name}.yaml").read_text())  # the file still parses
    assert comment["name"] == name


# --------------------------------------------------------------------------- what the trainer and model receive

TRAINED = [(p, r) for p, r in ROWS if r.trained]


def trainer_received(recipe) -> dict[str, object]:
    """``training.KEY`` → value for every argument of the trainer augcse builds for ``recipe`` that is not the
    trainer's own default, and every argument augcse holds (``TRAINED_WITH``; the selection's only with a dev
    task) whatever its value."""
    import dataclasses
    import enum

    from sentence_transformers import SentenceTransformerTrainingArguments

    from augcse.training.arguments import TRAINED_WITH, training_arguments

    args = training_arguments(recipe, has_dev=recipe.eval.dev is not None, total_steps=1000)
    default = SentenceTransformerTrainingArguments(output_dir=args.output_dir)
    plain = lambda value: value.value if isinstance(value, enum.Enum) else value  # noqa: E731
    held = set(TRAINED_WITH) - ({"eval_steps", "load_best_model_at_end"} if recipe.eval.dev is None else set())
    out = {f"training.{field.name}": plain(getattr(args, field.name)) for field in dataclasses.fields(args)
           if field.name in held or plain(getattr(args, field.name)) != plain(getattr(default, field.name))}
    if args.augcse_schedule is not None:  # one of augcse's schedules: the trainer steps through it, not its stand-in
        name, kwargs = args.augcse_schedule
        del out["training.lr_scheduler_kwargs"]
        out.update({"training.lr_scheduler_type": name,
                    **{f"training.lr_scheduler_kwargs.{k}": v for k, v in kwargs.items()}})
    return out


def model_received(recipe, backbone) -> dict[str, object]:
    """``model.config.KEY`` → value for every dropout of the encoder ``build_model`` builds for ``recipe``, on
    ``backbone`` (the tiny BERT: the papers' BERT and RoBERTa configs name their dropouts alike)."""
    from unittest import mock

    from augcse.training import build

    with mock.patch.object(build, "resolve_model", lambda name: str(backbone)):
        model = build.build_model(recipe)
    config = model[0].auto_model.config.to_dict()
    return {f"model.config.{key}": value for key, value in config.items() if "dropout" in key}


def unaccounted(paper: str, row, recipe, received: dict[str, object]) -> list[str]:
    """Each received setting that is not exempt and has no status, or is not the status's value, or (a
    backbone's value) is not stated in the recipe, so another backbone could change it."""
    by_key = {s.key: s for s in paper_settings.settings(paper, row.name)}
    stated = resolved(row, recipe)
    out = []
    for key, value in received.items():
        if paper_settings.is_exempt(key):
            continue
        if key not in by_key:
            out.append(f"{key} = {value!r}: no status")
        elif not paper_settings._same(value, by_key[key].expected):
            out.append(f"{key} = {value!r}: the table holds {by_key[key].expected!r}")
        elif paper_settings.lookup(stated, key) is paper_settings.MISSING:
            out.append(f"{key} = {value!r}: not stated in the recipe (the backbone's own)")
    return out


@pytest.mark.parametrize(("paper", "row"), TRAINED, ids=[f"{p}/{r.name}" for p, r in TRAINED])
def test_every_setting_the_trainer_and_model_receive_has_a_status(paper, row, tiny_model_dir):
    """Completeness from the other side: not the table's keys or the recipe's, but what the trainer is built
    with and the dropout the built encoder has; a setting nobody listed, such as a dropout left to the
    checkpoint, fails here."""
    from augcse.studies.runs import PLAN_OVERRIDES
    from augcse.training.recipes.config import load_recipe

    recipe = load_recipe(None, row.recipe, [*row.overrides, *PLAN_OVERRIDES])
    received = {**trainer_received(recipe), **model_received(recipe, tiny_model_dir)}
    assert {"model.config.hidden_dropout_prob", "training.learning_rate", "training.fp16"} <= set(received)
    assert not unaccounted(paper, row, recipe, received), f"{paper}/{row.name}: {unaccounted(paper, row, recipe, received)}"


def test_a_dropout_without_status_or_recipe_value_fails(tiny_model_dir, monkeypatch):
    """The derived check is real: ESimCSE-RoBERTa-large left at the checkpoint's dropout (no model.config) is
    caught by name, as are a row left at the checkpoint's dropout and a row whose table lacks its status."""
    from augcse.studies.runs import PLAN_OVERRIDES
    from augcse.training.recipes.config import load_recipe

    row = {r.name: r for r in papers()["cards"].rows}["esimcse-roberta-large"]
    recipe = load_recipe(None, row.recipe, [*row.overrides, *PLAN_OVERRIDES, "model.config={}"])
    problems = unaccounted("cards", row, recipe, model_received(recipe, tiny_model_dir))
    assert problems == ["model.config.hidden_dropout_prob = 0.1: the table holds 0.15",
                        "model.config.attention_probs_dropout_prob = 0.1: the table holds 0.15"]
    row = {r.name: r for r in papers()["cards"].rows}["roberta-base"]
    recipe = load_recipe(None, row.recipe, [*row.overrides, *PLAN_OVERRIDES, "model.config={}"])
    assert unaccounted("cards", row, recipe, model_received(recipe, tiny_model_dir))[0] == \
        "model.config.hidden_dropout_prob = 0.1: not stated in the recipe (the backbone's own)"
    table = copy.deepcopy(paper_settings._table())
    for profile in ("trained", "cards"):
        del table["profiles"][profile]["model.config.hidden_dropout_prob"]
    monkeypatch.setattr(paper_settings, "_table", lambda: table)
    recipe = load_recipe(None, row.recipe, [*row.overrides, *PLAN_OVERRIDES])
    assert unaccounted("cards", row, recipe, model_received(recipe, tiny_model_dir)) == \
        ["model.config.hidden_dropout_prob = 0.1: no status"]
