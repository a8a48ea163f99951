"""Every file augcse reads from someone else is parsed safely: YAML aliases that expand without bound (or refer to
themselves) are refused in one line wherever YAML is read, a pickle in a checkpoint's loss state never runs (even
with torch's ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``), and a damaged run record is one line in report and compare."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml

from augcse.commands.main import main
from augcse.core import yamlfile


def bomb(levels: int = 9) -> str:
    """A "billion laughs" of ``levels`` nine-fold aliases: under a kilobyte, 9**levels values expanded."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def flow_bomb() -> str:
    inner = ", ".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9))
    return "{l0: &l0 [x, x, x, x, x, x, x, x, x], " + inner + "}"


def test_an_alias_bomb_and_a_recursive_alias_are_refused_in_one_line() -> None:
    assert len(bomb()) < 1024
    for text in (bomb(), "a: &a [1, *a]\n"):
        with pytest.raises(yamlfile.AliasBombError) as caught:
            yamlfile.load(text)
        assert len(str(caught.value).splitlines()) == 1 and str(caught.value).startswith("line ")


def test_shared_blocks_still_load() -> None:
    text = "base: &b {lr: 1.0e-5, steps: 8}\none: {<<: *b, steps: 16}\ntwo: *b\n"
    assert yamlfile.load(text)["one"] == {"lr": 1e-5, "steps": 16}


def _recipe_with_bomb(tmp_path: Path) -> Path:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ntraining:\n  lr_scheduler_kwargs:\n" + "".join(
        f"    {line}\n" for line in bomb().splitlines()))
    return recipe


def _grid_with_bomb(tmp_path: Path) -> Path:
    grid = tmp_path / "g.yaml"
    grid.write_text("seeds: [1]\nrecipe: quickstart\ntasks: STSBenchmark\nrows: {a: {}}\nextra:\n" + "".join(
        f"  {line}\n" for line in bomb().splitlines()))
    return grid


def _run_with_bomb(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "recipe.yaml").write_text(bomb())
    return run


# every command that reads YAML a user may have been handed, and how to hand it the bomb
COMMANDS = {
    "train recipe": lambda t: ["train", str(_recipe_with_bomb(t))],
    "train override": lambda t: ["train", "--recipe", "quickstart", f"training.lr_scheduler_kwargs={flow_bomb()}"],
    "study grid": lambda t: ["study", str(_grid_with_bomb(t)), "--output", str(t / "out")],
    "report run": lambda t: ["report", str(_run_with_bomb(t))],
    "compare runs": lambda t: ["compare", str(_run_with_bomb(t)), str(_run_with_bomb(t / "b"))],
}


def test_every_command_refuses_an_alias_bomb_in_one_line(tmp_path: Path) -> None:
    """All commands in one child process whose memory is capped: a regression fails here, it does not take the
    machine's memory (a bomb unfolded by a dump or a validation grows by gigabytes)."""
    import json
    import subprocess
    import sys

    (tmp_path / "b").mkdir()
    commands = {name: make(tmp_path) for name, make in COMMANDS.items()}
    script = f"""
import contextlib, io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from augcse.commands.main import main
out = {{}}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    out[name] = [code, err.getvalue().strip().splitlines()]
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", script, json.dumps(commands)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for name, (code, err) in json.loads(done.stdout.strip().splitlines()[-1]).items():
        assert code == 2 and len(err) == 1 and "alias" in err[0], (name, code, err)


@pytest.mark.parametrize("text", ["name: [unclosed\n", "a: b: c\n", "\xff\xfe"])
def test_a_damaged_recipe_in_a_run_is_one_line_in_report(text: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_bytes(text.encode("latin-1"))
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "recipe.yaml" in err[0], err


class Payload:
    marker = ""

    def __reduce__(self):
        return (Path(self.marker).write_text, ("ran",))


@pytest.mark.parametrize("force", [False, True])
def test_a_pickle_in_a_loss_state_never_runs(force: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from augcse.training.callbacks import LOSS_STATE, restore_loss_state

    if force:
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    Payload.marker = str(tmp_path / "marker")
    (tmp_path / LOSS_STATE).write_bytes(pickle.dumps({"w": Payload()}))
    with pytest.raises(Exception):
        restore_loss_state(torch.nn.Linear(1, 1), tmp_path)
    assert not (tmp_path / "marker").exists()


def test_every_torch_load_in_augcse_states_weights_only() -> None:
    """The rule read from the source: a new call without it fails here."""
    import ast

    import augcse

    root = Path(augcse.__file__).parent
    calls = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("torch.load", "np.load", "numpy.load"):
                keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
                calls.append((path.name, keywords))
    assert calls
    for name, keywords in calls:
        assert keywords.get("weights_only") == "True" or keywords.get("allow_pickle") == "False", (name, keywords)
