"""What a user meets first: fast --version/--help, help on every option, did-you-mean for every registered
name, ``eval --list`` without a model, and a tiny training run that prints no warning of augcse's making."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import tiny_cls_recipe

from augcse.commands.main import COMMANDS, main

HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "datasets", "matplotlib", "numpy")
QUICK = [["--version"], ["--help"], *([name, "--help"] for name in COMMANDS)]


def walk(parser: argparse.ArgumentParser, path: list[str]):
    """Every (command path, parser) below ``parser``, sub-sub-commands included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, [*path, name])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_of_every_command_has_help(command: str) -> None:
    parser = argparse.ArgumentParser()
    importlib.import_module(COMMANDS[command].module).add_commands(parser.add_subparsers())
    own = parser._subparsers._group_actions[0].choices[command]
    for path, sub in walk(own, [command]):
        assert sub.description, f"augcse {' '.join(path)} has no description"
        for action in sub._actions:
            assert action.help and action.help != argparse.SUPPRESS, \
                f"augcse {' '.join(path)} {'/'.join(action.option_strings) or action.dest} has no help"


def test_the_top_level_options_have_help() -> None:
    from augcse.commands.main import build_parser

    parser = build_parser()
    assert parser.description
    for action in parser._actions:
        assert action.help, f"augcse {'/'.join(action.option_strings) or action.dest} has no help"


@pytest.mark.parametrize("argv", QUICK, ids=" ".join)
def test_help_and_version_load_nothing_heavy(argv: list[str]) -> None:
    code = (f"import json, sys\nfrom augcse.commands.main import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print(json.dumps([n for n in {list(HEAVY)!r} if n in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [], f"augcse {' '.join(argv)} imports heavy modules"


def test_eval_list_needs_no_model(capsys: pytest.CaptureFixture) -> None:
    assert main(["eval", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("sts: STS12") for line in lines)


def test_eval_without_a_model_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert main(["eval"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give a MODEL" in err[0]


@pytest.mark.parametrize(("overrides", "hint"), [
    (["loss.name=SimCSE"], "did you mean 'simcse'"),
    (["loss.name=sim-cse"], "did you mean 'simcse'"),
    (["data.views=[{name: Dropout-Copy}]"], "did you mean 'dropout_copy'"),
    (["model.pooler=avg_firstlast"], "did you mean 'avg_first_last'"),
    (["model.pooler=AVG"], "did you mean 'avg'"),
    (["eval.dev=stsbenchmarkdev"], "did you mean 'STSBenchmark-dev'"),
    (["eval.after=STS-12"], "did you mean 'STS12'"),
    (["loss.params.temprature=0.1"], "did you mean 'temperature'"),
], ids=lambda x: x[0] if isinstance(x, list) else "")
def test_recipe_names_get_a_did_you_mean(overrides: list[str], hint: str) -> None:
    from augcse.training.recipes.config import RecipeError, load_recipe

    with pytest.raises(RecipeError, match=hint):
        load_recipe(None, "quickstart", overrides)


def test_recipe_name_gets_a_did_you_mean(capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--recipe", "quickstrat"]) == 2
    assert "did you mean 'quickstart'" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "hint"), [("RandomSwapp", "did you mean RandomSwap"),
                                           ("8-2-augg", "did you mean 8-2-aug")])
def test_augmentation_names_get_a_did_you_mean(name: str, hint: str) -> None:
    from augcse.text.augment import resolve_names

    assert resolve_names("randomswap") == ["RandomSwap"]
    with pytest.raises(ValueError, match=hint):
        resolve_names(name)


def test_task_names_get_a_did_you_mean(capsys: pytest.CaptureFixture) -> None:
    assert main(["eval", "some-model", "--tasks", "sickrelatednes"]) == 2  # refused before any model loads
    assert "did you mean 'SICKRelatedness'" in capsys.readouterr().err


def test_a_tiny_run_warns_of_nothing_augcse_causes(tmp_path: Path, tiny_model_dir: Path, data_dir: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from augcse.training.recipes.config import load_recipe
    from augcse.training.reference import training_defaults
    from augcse.training.run import run

    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "quiet",
                             {"dev": "STSBenchmark-dev-original", "before": None, "after": None},
                             {"max_steps": 2, "eval_steps": 2})
    ours = {row[0].strip("`") for row in training_defaults()} | {"warmup_ratio", "warmup_steps"}
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        run(load_recipe(str(recipe), None, []), data_dir)
    made_here = [f"{w.category.__name__}: {w.message} ({w.filename})" for w in caught
                 if "/augcse/" in Path(w.filename).as_posix() or any(name in str(w.message) for name in ours)]
    assert not made_here, made_here
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("augcse")]
    assert not logged, logged
