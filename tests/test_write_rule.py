"""augcse creates or replaces only regular files and folders it made: never anything through a symbolic link.

The matrix is generated from the registries of the names each command writes (a run folder's
:data:`augcse.training.rundir.WRITTEN`, a study's, a reproduction's, a comparison's, an augmentation cache's):
each name stands as a relative link to a file outside, or to a folder outside, in a folder the command then
writes; the command must end with exit 2 and one line, no traceback, and nothing outside may change. Every case
is refused before a model loads, so each takes well under a second.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from augcse.commands import reproduce as reproduce_command, report as report_command, study as study_command
from augcse.commands.main import main
from augcse.core import outputs
from augcse.core.folder_lock import take_lock
from augcse.text.augment import cache
from augcse.training import rundir

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RECIPE = {"name": "r", "seed": 1, "training": {"max_steps": 8}}


# --------------------------------------------------------------------------- the outside and its fingerprint

def outside_tree(root: Path) -> Path:
    """A user's files next to the run: a file, a folder with files, a lock-like file with content."""
    outside = root / "outside"
    (outside / "folder" / "sub").mkdir(parents=True)
    (outside / "file.txt").write_text("the user's own file\n")
    (outside / "folder" / "README.md").write_text("the user's readme\n")
    (outside / "folder" / "sub" / "config.json").write_text('{"user": true}\n')
    return outside


def fingerprint(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: its kind, bytes and modification time (a rewrite with the same bytes shows)."""
    found: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_symlink():
            found[str(path.relative_to(root))] = ("link", os.readlink(path))
        elif path.is_file():
            found[str(path.relative_to(root))] = ("file", path.read_bytes(), info.st_mtime_ns)
        else:
            found[str(path.relative_to(root))] = ("folder", sorted(p.name for p in path.iterdir()))
    return found


def plant(place: Path, target: Path) -> None:
    """A relative symbolic link at ``place`` (replacing what was there) to ``target``."""
    if place.is_dir() and not place.is_symlink():
        shutil.rmtree(place)
    elif place.exists() or place.is_symlink():
        place.unlink()
    place.parent.mkdir(parents=True, exist_ok=True)
    place.symlink_to(os.path.relpath(target, place.parent))


LINKS = {"link-to-a-file": lambda outside: outside / "file.txt", "link-to-a-folder": lambda outside: outside / "folder"}


# --------------------------------------------------------------------------- folders as augcse leaves them

def copied_run(run: Path) -> None:
    """A run folder augcse made (marker, recipe, records, a complete checkpoint), as copied from elsewhere."""
    (run / "checkpoint-2").mkdir(parents=True)
    (run / rundir.MARKER).write_text("an augcse run folder\n")
    (run / rundir.RECIPE).write_text(yaml.safe_dump(RECIPE))
    (run / "log.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    (run / "eval.json").write_text("{}")
    (run / "checkpoint-2" / "trainer_state.json").write_text("{}")
    (run / "checkpoint-2" / rundir.LOSS_STATE).write_bytes(b"state")


def texts_file(root: Path, lines: int = 300) -> Path:
    path = root / "texts.txt"
    path.write_text("".join(f"Ticket {i} says the printer on floor {i % 9} is broken again.\n" for i in range(lines)))
    return path


def grid_file(root: Path, name: str = "g") -> Path:
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"seeds": [1], "recipe": "quickstart", "tasks": "STSBenchmark-dev-original",
                                    "rows": {"a": {"overrides": ["training.max_steps=1", "data.limit=64"]}}}))
    return path


@dataclass(frozen=True)
class Command:
    """A command that writes into a folder: the names it writes there, how to make that folder as augcse left it
    (``prepare(root) -> folder``), and its command line (``argv(root, folder)``)."""

    names: tuple[str, ...]
    prepare: Callable[[Path], Path]
    argv: Callable[[Path, Path], list[str]]


def _run_folder(root: Path) -> Path:
    copied_run(root / "runs" / "r")
    return root / "runs" / "r"


def _train(*flags: str) -> Callable[[Path, Path], list[str]]:
    return lambda root, run: ["train", "--recipe", "quickstart", f"output_dir={run.parent}", f"name={run.name}", *flags]


def _study_folder(root: Path) -> Path:
    copied_run(root / "out" / "g" / "a-s1")
    return root / "out" / "g"


def _cache_folder(root: Path) -> Path:
    (root / "cache" / "shards").mkdir(parents=True)
    (root / "cache" / "manifest.json").write_text("{}")
    return root / "cache"


def _empty_folder(name: str) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        (root / name).mkdir(parents=True)
        return root / name
    return make


RUN_NAMES = rundir.WRITTEN
COMMANDS: dict[str, Command] = {
    "train": Command(RUN_NAMES, _run_folder, _train()),
    "train --resume": Command(RUN_NAMES, _run_folder, _train("--resume")),
    "train --overwrite": Command(RUN_NAMES, _run_folder, _train("--overwrite")),
    "train --auto-resume": Command(RUN_NAMES, _run_folder, _train("--auto-resume")),
    "report": Command(RUN_NAMES, _run_folder, lambda root, run: ["report", str(run)]),
    "eval --save-to": Command(RUN_NAMES, _run_folder, lambda root, run: [
        "eval", MODEL, "--tasks", "STSBenchmark-dev-original", "--save-to", str(run)]),
    "adapt": Command(RUN_NAMES, _run_folder, lambda root, run: [
        "adapt", str(texts_file(root)), f"output_dir={run.parent}", f"name={run.name}"]),
    "study": Command((*study_command.WRITTEN, "a-s1"), _study_folder, lambda root, folder: [
        "study", str(grid_file(root)), "--output", str(folder.parent)]),
    "augment": Command(cache.WRITTEN, _cache_folder, lambda root, folder: [
        "augment", "--corpus", str(texts_file(root)), "--augs", "RandomSwap", "--out", str(folder)]),
    "compare --out": Command(report_command.COMPARE_WRITTEN, _empty_folder("cmp"), lambda root, folder: [
        "compare", str(_run_folder(root)), "--out", str(folder)]),
    "reproduce": Command(reproduce_command.WRITTEN, _empty_folder("repro/simcse"), lambda root, folder: [
        "reproduce", "simcse", "--output", str(folder.parent)]),
    # the output itself is the name: encode's file, whiten's folder
    "encode --out": Command(("e.npy",), lambda root: root, lambda root, folder: [
        "encode", MODEL, str(texts_file(root)), "--out", str(folder / "e.npy")]),
    "whiten --out": Command(("whitened",), lambda root: root, lambda root, folder: [
        "whiten", MODEL, "--corpus", str(texts_file(root)), "--out", str(folder / "whitened")]),
}
CASES = [(command, name) for command, spec in COMMANDS.items() for name in spec.names]


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize(("command", "name"), CASES)
def test_no_command_writes_through_a_link_in_its_folder(command: str, name: str, link: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    spec = COMMANDS[command]
    outside = outside_tree(tmp_path)
    folder = spec.prepare(tmp_path)
    plant(folder / name, LINKS[link](outside))
    argv = spec.argv(tmp_path, folder)
    before = fingerprint(outside)
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert fingerprint(outside) == before
    assert (folder / name).is_symlink()  # the user's link is left as it was, not replaced


# --------------------------------------------------------------------------- the cases found one by one

def test_a_lock_link_on_a_finished_run_leaves_the_outside_lock_untouched(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    outside = outside_tree(tmp_path)
    (outside / "lock").write_text("the user's lock file\n")
    run = _run_folder(tmp_path)
    (run / rundir.FINISHED).write_text("{}")
    plant(run / rundir.LOCK, outside / "lock")
    before = fingerprint(outside)
    code = main(_train()(tmp_path, run))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "symbolic link" in err[0], err
    assert (outside / "lock").read_text() == "the user's lock file\n" and fingerprint(outside) == before


def test_a_grid_named_dots_is_refused_before_anything_is_written(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture) -> None:
    """``...yaml``'s stem is ``..``: its study folder would be the parent of --output, holding the user's own
    study.md and a run of the same name."""
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "study.md").write_text("the user's notes\n")
    copied_run(work / "a-s1")
    grid = grid_file(tmp_path, "..")
    assert grid.name == "...yaml"
    before = fingerprint(work)
    code = main(["study", str(grid), "--output", str(work / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "folder name" in err[0] and "rename the file" in err[0], err
    assert fingerprint(work) == before


@pytest.mark.parametrize("name", ["..", ".", "...", "a/b", "/abs", "", ".hidden", "a..b"])
def test_the_folder_name_rule(name: str) -> None:
    from augcse.core.names import check_folder_name, is_folder_name

    assert not is_folder_name(name)
    with pytest.raises(ValueError, match="must be a folder name"):
        check_folder_name(name, "row name", "it names a folder")


@pytest.mark.parametrize("flag", ["--overwrite", "--auto-resume", "--resume", ""])
def test_a_folder_with_only_a_recipe_is_not_a_run(flag: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    mine = tmp_path / "runs" / "r"
    mine.mkdir(parents=True)
    (mine / "recipe.yaml").write_text("name: r\n# my notes on this recipe\n")
    (mine / "notes.txt").write_text("years of work\n")
    before = fingerprint(tmp_path / "runs")
    code = main(_train(*[f for f in [flag] if f])(tmp_path, mine))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is not an augcse run" in err[0], err
    assert fingerprint(tmp_path / "runs") == before


@pytest.mark.parametrize("record", [*rundir.RUN_RECORDS, "checkpoint-2/trainer_state.json"])
def test_a_run_made_before_the_marker_is_still_a_run(record: str, tmp_path: Path) -> None:
    run = tmp_path / "r"
    (run / record).parent.mkdir(parents=True, exist_ok=True)
    (run / rundir.RECIPE).write_text(yaml.safe_dump(RECIPE))
    assert not rundir.is_run_folder(run)
    (run / record).write_text("{}")
    assert rundir.is_run_folder(run)


@pytest.mark.parametrize("state", ["missing", "empty"])
def test_resume_of_a_run_never_started_says_to_start_it(state: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "runs" / "r"
    if state == "empty":
        run.mkdir(parents=True)
    code = main(_train("--resume")(tmp_path, run))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "nothing to resume" in err[0] and "without --resume" in err[0] and "--overwrite" not in err[0], err
    assert state == "empty" or not run.exists()  # the folder the refusal created is gone again


# --------------------------------------------------------------------------- the primitives, links planted late

def test_an_atomic_write_replaces_a_link_planted_at_its_temporary_name(tmp_path: Path) -> None:
    outside = outside_tree(tmp_path)
    target = tmp_path / "record.json"
    plant(tmp_path / f".record.json.tmp-{os.getpid()}", outside / "file.txt")
    outputs.write_text_atomically(target, "{}")
    assert target.read_text() == "{}" and not target.is_symlink()
    assert (outside / "file.txt").read_text() == "the user's own file\n"


@pytest.mark.parametrize("write", ["write_text_atomically", "append_line"])
def test_a_small_write_refuses_a_link_in_its_place(write: str, tmp_path: Path) -> None:
    outside = outside_tree(tmp_path)
    plant(tmp_path / "log.jsonl", outside / "file.txt")
    before = fingerprint(outside)
    with pytest.raises(outputs.LinkRefused, match="symbolic link"):
        getattr(outputs, write)(tmp_path / "log.jsonl", "{}")
    assert fingerprint(outside) == before


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_the_lock_is_never_taken_through_a_link_or_on_a_pipe(kind: str, tmp_path: Path) -> None:
    outside = outside_tree(tmp_path)
    lock = tmp_path / ".lock"
    if kind == "link":
        plant(lock, outside / "file.txt")
    else:
        os.mkfifo(lock)  # opening a pipe for writing would block: it is refused at once instead
    before = fingerprint(outside)
    with pytest.raises(outputs.LinkRefused):
        take_lock(lock)
    assert fingerprint(outside) == before


def test_the_lock_is_not_truncated_before_it_is_held(tmp_path: Path) -> None:
    """A lock another process holds keeps the PID it wrote: a refused command reads it and writes nothing."""
    lock = tmp_path / ".lock"
    held = take_lock(lock)
    try:
        with pytest.raises(Exception) as refused:
            take_lock(lock)
        assert getattr(refused.value, "holder", None) == str(os.getpid())
        assert lock.read_text() == str(os.getpid())
    finally:
        held.close()


def test_a_link_deep_in_a_claimed_folder_is_found(tmp_path: Path) -> None:
    outside = outside_tree(tmp_path)
    deep = tmp_path / "study" / "set" / "a-s1" / "checkpoint-2" / "1_Pooling"
    deep.mkdir(parents=True)
    plant(deep / "config.json", outside / "file.txt")
    with pytest.raises(outputs.LinkRefused, match="config.json"):
        outputs.refuse_links(tmp_path / "study", "--output")
    outputs.refuse_links(tmp_path / "outside", "--output")  # no link there: nothing to refuse


def test_a_write_that_fails_for_another_reason_is_not_called_a_link(tmp_path: Path) -> None:
    with pytest.raises(OSError) as failed:
        outputs.append_line(tmp_path / "missing" / "log.jsonl", "{}")
    assert failed.value.errno == errno.ENOENT
