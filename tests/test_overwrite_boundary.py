"""Only a run augcse made is ever emptied: every way a run folder is claimed (start, --resume, --auto-resume,
--overwrite; ``augcse train``; a study's restart) crossed with every folder that is not such a run (an ordinary
folder of files, a link to one, a link to a real run, a file) — refused in one line, and nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from augcse.commands.main import main
from augcse.training.rundir import RunFolder, RunFolderError

RECIPE = {"name": "r", "seed": 1, "training": {"learning_rate": 3e-5, "max_steps": 8}, "data": {"limit": 100}}


def ordinary_folder(target: Path, outside: Path) -> None:
    target.mkdir(parents=True)
    (target / "thesis.tex").write_text("years of work")
    (target / "figures").mkdir()
    (target / "figures" / "a.png").write_bytes(b"png")


def link_to_a_folder(target: Path, outside: Path) -> None:
    ordinary_folder(outside / "home", outside)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(outside / "home", target_is_directory=True)


def link_to_a_run(target: Path, outside: Path) -> None:
    run = outside / "someone-else-run"
    run.mkdir(parents=True)
    (run / "recipe.yaml").write_text(yaml.safe_dump(RECIPE))
    (run / "summary.json").write_text("{}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(run, target_is_directory=True)


def a_file(target: Path, outside: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("not a folder")


FOLDERS = [ordinary_folder, link_to_a_folder, link_to_a_run, a_file]
CLAIMS = {"start": {}, "resume": {"resume": True}, "auto-resume": {"resume": "auto"}, "overwrite": {"overwrite": True}}


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("claim", CLAIMS)
@pytest.mark.parametrize("make", FOLDERS, ids=lambda f: f.__name__)
def test_a_folder_augcse_did_not_make_is_never_emptied(make, claim: str, tmp_path: Path) -> None:
    target, outside = tmp_path / "runs" / "r", tmp_path / "outside"
    make(target, outside)
    before = snapshot(tmp_path)
    with pytest.raises(RunFolderError) as caught:
        RunFolder(target).claim(RECIPE, **CLAIMS[claim])
    assert len(str(caught.value).splitlines()) == 1
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("make", FOLDERS, ids=lambda f: f.__name__)
def test_train_with_overwrite_refuses_before_anything_loads(make, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    target, outside = tmp_path / "runs" / "r", tmp_path / "outside"
    make(target, outside)
    before = snapshot(tmp_path)
    code = main(["train", "--recipe", "quickstart", f"output_dir={tmp_path / 'runs'}", "name=r", "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert snapshot(tmp_path) == before


def test_a_run_augcse_made_is_still_overwritten(tmp_path: Path) -> None:
    run = tmp_path / "r"
    folder = RunFolder(run)
    assert folder.claim(RECIPE) is None
    (run / "recipe.yaml").write_text(yaml.safe_dump(RECIPE))
    (run / "summary.json").write_text("{}")
    folder.release()
    assert RunFolder(run).claim(RECIPE, overwrite=True) is None
    assert sorted(p.name for p in run.iterdir()) == [".augcse-run", ".lock"]


@pytest.mark.parametrize("key", ["/abs/olute", "../up", "a/b", ".hidden"])
@pytest.mark.parametrize("where", ["sets", "rows"])
def test_study_set_and_row_names_follow_the_run_name_rule(where: str, key: str, tmp_path: Path) -> None:
    from augcse.studies.study import GridError, load_grid

    target = tmp_path / "victim"
    ordinary_folder(target, tmp_path)
    before = snapshot(tmp_path)
    grid = tmp_path / "g.yaml"
    if where == "sets":
        body = {"seeds": [1], "sets": {key: {"recipe": "quickstart", "tasks": "STSBenchmark"}}, "rows": {"a": {}}}
    else:
        body = {"seeds": [1], "recipe": "quickstart", "tasks": "STSBenchmark", "rows": {key: {}}}
    grid.write_text(yaml.safe_dump(body))
    with pytest.raises(GridError) as caught:
        load_grid(grid)
    assert "folder name" in str(caught.value) and len(str(caught.value).splitlines()) == 1
    assert {k: v for k, v in snapshot(tmp_path).items() if k != "g.yaml"} == before


def test_a_study_never_restarts_a_folder_it_did_not_make(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A planned run's folder that exists but is not augcse's is refused by the study, not emptied."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"Sentence number {i} is about topic {i % 7} today.\n" for i in range(200)))
    grid = tmp_path / "g.yaml"
    grid.write_text(yaml.safe_dump({"seeds": [1], "recipe": "quickstart", "tasks": "STSBenchmark-dev-original",
                                    "rows": {"a": {"overrides": ["training.max_steps=1", "data.limit=64",
                                                                 f"data.corpus={corpus}", "eval.before=null"]}}}))
    ordinary_folder(tmp_path / "out" / "g" / "a-s1", tmp_path)
    before = snapshot(tmp_path / "out")
    code = main(["study", str(grid), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "is not an augcse run" in err, err
    assert snapshot(tmp_path / "out") == before
