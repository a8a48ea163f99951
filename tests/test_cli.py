"""The command line answers --version and --help without importing any command's heavy dependencies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from augcse.commands.main import COMMANDS, main

HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "datasets", "matplotlib", "numpy")
COMMAND_MODULES = sorted({entry.module for entry in COMMANDS.values()})


def imported_after(argv: list[str]) -> list[str]:
    """Modules (heavy or command modules) loaded by ``augcse ARGV`` in a fresh interpreter."""
    code = (
        "import json, sys\nfrom augcse.commands.main import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"names = {list(HEAVY + tuple(COMMAND_MODULES))!r}\n"
        "print(json.dumps([n for n in names if n in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"]])
def test_version_and_help_import_no_command_module(argv: list[str]) -> None:
    assert imported_after(argv) == []


@pytest.mark.parametrize("command", ["report", "compare", "assets", "encode"])
def test_subcommand_help_imports_only_its_module(command: str) -> None:
    assert imported_after([command, "--help"]) == [COMMANDS[command].module]


def test_every_command_is_listed_with_a_summary(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name, entry in COMMANDS.items():
        assert name in out and entry.summary.split()[0] in out


@pytest.mark.parametrize("command", ["encode", "report", "compare", "assets"])
def test_every_option_has_help(command: str, capsys: pytest.CaptureFixture) -> None:
    import argparse
    import importlib

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(COMMANDS[command].module).add_commands(sub)
    own = sub.choices[command]
    assert own.description, f"{command} has no description"
    for action in own._actions:
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"


def test_unknown_command_suggests_the_closest(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["reprot", "x"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "did you mean 'report'" in err[-1]


def test_assets_with_a_missing_data_dir_is_one_line_exit_2(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AUGCSE_DATA", str(tmp_path / "nowhere"))
    assert main(["assets"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "nowhere" in captured.err


def test_eval_without_a_data_directory_refuses_before_the_model_loads_and_names_the_embedded_tasks(
        monkeypatch, capsys, tmp_path):
    import augcse.models.load
    from augcse.commands.main import main

    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    monkeypatch.setattr(augcse.models.load, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    assert main(["eval", "runs/quickstart/final"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("augcse eval: error: STS12, STS13, STS14, STS15 and 3 more need a data directory "
                          "(--data-dir DIR or $AUGCSE_DATA; augcse download sts --data-dir DIR fetches it); "
                          "without one, these tasks run: Geometry, STSBenchmark-dev-original, STSBenchmark-original "
                          "(e.g. --tasks STSBenchmark-original)")
    assert "\n" not in err
    assert main(["eval", "runs/quickstart/final", "--suite", "transfer", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"augcse eval: error: MR, CR, SUBJ, MPQA and 3 more: files missing from the data directory {tmp_path}; "
        f"fetch them with augcse download transfer --data-dir {tmp_path}")


def test_train_names_the_clash_of_a_recipe_file_and_a_built_in_recipe(tmp_path, monkeypatch, capsys):
    from augcse.commands.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "quickstart"]) == 2
    assert capsys.readouterr().err.strip() == ("augcse train: error: recipe file quickstart does not exist; for the "
                                               "built-in recipe, write --recipe quickstart")
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    assert main(["train", "mine.yaml", "--recipe", "quickstart"]) == 2
    assert capsys.readouterr().err.strip() == ("augcse train: error: give either a recipe file (mine.yaml) or "
                                               "--recipe quickstart, not both")
