"""The one error boundary of ``augcse`` (:func:`augcse.commands.main.main`): every fault of the world is one line.

Each kind of fault (a file that may not be read, a file gone, a read-only or full disk, memory, undecodable text,
a csv cell over the limit, Ctrl-C) is injected where a command meets it: a function the command calls is
replaced by one that raises it (as root, on a disk with room, the machine cannot produce most of them), or does
the real failing read (the undecodable file, the csv cell). Each case asserts the exit code (2 before the
command's work began, 1 during it, 130 for an interrupt), exactly one line on stderr naming the path or the
setting, no traceback unless ``--debug``, and what is left on disk.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from augcse.commands.main import main
from test_output_probe import COMMANDS as UNWRITABLE

LATIN1 = "text,label\nun café,boisson\n".encode("latin-1")  # byte 0xe9 at offset 21


def _err(capsys: pytest.CaptureFixture) -> list[str]:
    """The stderr lines a command printed, progress bars and log lines aside."""
    lines = capsys.readouterr().err.strip().splitlines()
    return [line for line in lines if line.strip() and not line.startswith(("Loading weights", "20"))
            and not re.search(r"\d+%\|", line)]


def read_latin1(path: Path) -> str:
    """``path`` written in Latin-1, then read as UTF-8: Python's UnicodeDecodeError, which names no file."""
    path.write_bytes(LATIN1)
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def read_huge_csv(path: Path) -> list:
    """``path`` written as a CSV whose third line holds a cell over the csv module's 128 KiB limit, then read."""
    path.write_text(f"text,label\na cat,pets\n{'x' * 200_000},pets\n")
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        return list(reader)


# fault kind -> (what the failure point does with a path, exit code during work, what the line says)
FAULTS: dict[str, tuple[Callable[[Path], BaseException | None], int, list[str]]] = {
    "permission denied": (lambda p: PermissionError(errno.EACCES, "Permission denied", str(p)), 1,
                          ["{path}", "permission denied"]),
    "file gone": (lambda p: FileNotFoundError(errno.ENOENT, "No such file or directory", str(p)), 1,
                  ["{path}", "no such file"]),
    "read-only filesystem": (lambda p: OSError(errno.EROFS, "Read-only file system", str(p)), 1,
                             ["{path}", "read-only file system", "choose a writable"]),
    "full disk": (lambda p: OSError(errno.ENOSPC, "No space left on device", str(p)), 1,
                  ["{path}", "No space left on device", "free space"]),
    "out of memory": (lambda p: MemoryError(), 1, ["out of memory", "{memory}"]),
    "out of memory (torch CPU)": (lambda p: RuntimeError(
        "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried to "
        "allocate 98304000000 bytes. Error code 12 (Cannot allocate memory)"), 1, ["out of memory", "{memory}"]),
    "undecodable text": (read_latin1, 1, ["{path}", "byte b'\\xe9'", "utf-8"]),
    "csv field limit": (read_huge_csv, 1, ["{path}", "line 3", "field limit"]),
    "interrupt": (lambda p: KeyboardInterrupt(), 130, ["interrupted", "run the same command again"]),
}


def failing(make: Callable[[Path], BaseException | None], path: Path) -> Callable:
    """A stand-in for a function a command calls: raises the fault (or does the failing read)."""
    def fail(*args, **kwargs):
        fault = make(path)
        if fault is not None:
            raise fault
    return fail


@pytest.mark.parametrize("kind", list(FAULTS))
def test_each_kind_of_fault_is_one_line_naming_the_path_or_setting(kind, tmp_path, monkeypatch, capsys) -> None:
    make, code, says = FAULTS[kind]
    text, out = tmp_path / "in.txt", tmp_path / "e.npy"
    text.write_text("one.\n")
    monkeypatch.setattr("augcse.commands.encode.load_model", failing(make, tmp_path / "model.safetensors"))
    assert main(["encode", "some-model", str(text), "--out", str(out), "--batch-size", "7"]) == code
    err = _err(capsys)
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith("augcse encode: ")
    for part in says:
        assert part.format(path=tmp_path / "model.safetensors", memory="--batch-size (now 7)") in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("kind", ["permission denied", "file gone", "undecodable text"])
def test_a_fault_before_the_work_begins_is_a_refusal(kind, tmp_path, monkeypatch, capsys) -> None:
    """The same errors met while the inputs are read, before the model loads, refuse the input: exit 2."""
    make, _, says = FAULTS[kind]
    text = tmp_path / "in.txt"
    monkeypatch.setattr("augcse.commands.encode.read_sentences", failing(make, text))
    assert main(["encode", "some-model", str(text), "--out", str(tmp_path / "e.npy")]) == 2
    err = _err(capsys)
    assert len(err) == 1 and all(part.format(path=text) in err[0] for part in says if "{memory}" not in part), err


def test_debug_prints_the_traceback_above_the_line(tmp_path, monkeypatch, capsys) -> None:
    make, _, _ = FAULTS["full disk"]
    monkeypatch.setattr("augcse.commands.encode.load_model", failing(make, tmp_path / "x"))
    text = tmp_path / "in.txt"
    text.write_text("one.\n")
    argv = ["encode", "some-model", str(text), "--out", str(tmp_path / "e.npy")]
    assert main(["--debug", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "OSError: [Errno 28]" in err
    assert err.strip().splitlines()[-1].startswith("augcse encode: error: ")
    monkeypatch.setenv("AUGCSE_DEBUG", "1")
    assert main(argv) == 1 and "Traceback" in capsys.readouterr().err


def test_a_programming_error_keeps_its_traceback(tmp_path, monkeypatch) -> None:
    text = tmp_path / "in.txt"
    text.write_text("one.\n")

    def broken(*args, **kwargs):
        raise TypeError("load_model() got an unexpected keyword argument 'x'")

    monkeypatch.setattr("augcse.commands.encode.load_model", broken)
    with pytest.raises(TypeError):
        main(["encode", "some-model", str(text), "--out", str(tmp_path / "e.npy")])
    monkeypatch.setattr("augcse.commands.encode.load_model", failing(lambda p: RuntimeError("a bug, not memory"), text))
    with pytest.raises(RuntimeError):
        main(["encode", "some-model", str(text), "--out", str(tmp_path / "e.npy")])


# ---------------------------------------------------------------------------------------------------------------
# The fault matrix: every command × every kind of fault that applies, each case recorded (command, fault, exit,
# the line, what is left) in the JSON file $AUGCSE_WRITE_FAULT_MATRIX names; docs/FAULTS.md's fault-matrix block
# is generated from that record (python -m augcse.commands.docs).

RECORD_ENV = "AUGCSE_WRITE_FAULT_MATRIX"
GRID = Path(__file__).resolve().parents[1] / "src" / "augcse" / "data" / "studies" / "adapt-curves.yaml"
MODEL_FAULTS = list(FAULTS)  # train and eval (a corpus or labelled CSV) meet every kind
NO_TEXT = [k for k in FAULTS if k not in ("out of memory (torch CPU)", "undecodable text", "csv field limit")]
NO_CSV = [k for k in FAULTS if k != "csv field limit"]  # the commands that read no csv file themselves


class Case(NamedTuple):
    argv: list[str]  # {tmp} is the test's folder, {model} the tiny model
    point: str  # the function the fault is raised from, called once the command's work has begun
    path: str  # the file the fault is about (named in the line)
    output: str  # the folder whose contents are "what is left"
    memory: str  # the setting the out-of-memory line names
    kinds: list[str]
    input: str = "{tmp}/in.txt"  # the file that does not decode, or holds the csv cell over the limit
    interrupt_point: str | None = None  # where Ctrl-C lands, when elsewhere than ``point``


CASES: dict[str, Case] = {
    "train": Case(["train", "{tmp}/recipe.yaml"], "augcse.training.run.build_setup", "{tmp}/corpus.txt",
                  "{tmp}/runs", "training.per_device_train_batch_size", MODEL_FAULTS, "{tmp}/corpus.txt",
                  interrupt_point="augcse.training.run.evaluate"),  # the starting model's evaluation
    "eval": Case(["eval", "{model}", "--tasks", "STSBenchmark-dev-original", "--save-to", "{tmp}/run", "--batch-size",
                  "5"], "augcse.evaluation.suite.run_tasks", "{tmp}/data/sts-dev.csv", "{tmp}/run",
                 "--batch-size (now 5)", MODEL_FAULTS, "{tmp}/clusters.csv"),
    "encode": Case(["encode", "{model}", "{tmp}/in.txt", "--out", "{tmp}/out/e.npy", "--batch-size", "5"],
                   "augcse.commands.encode.encode", "{tmp}/out/e.npy", "{tmp}/out", "--batch-size (now 5)",
                   NO_TEXT + ["out of memory (torch CPU)", "undecodable text"]),
    "augment": Case(["augment", "--corpus", "{tmp}/in.txt", "--augs", "RandomSwap", "--out", "{tmp}/cache",
                     "--shard-size", "1"], "augcse.text.augment.cache._build_shard", "{tmp}/cache",
                    "{tmp}/cache", "--n-process (now 1) or --shard-size (now 1)",
                    NO_TEXT + ["out of memory (torch CPU)", "undecodable text"]),
    "report": Case(["report", "{tmp}/run"], "augcse.report.run_report.write_report", "{tmp}/run/report.md",
                   "{tmp}/run", "free memory", NO_TEXT + ["undecodable text"], "{tmp}/run/log.jsonl"),
    "compare": Case(["compare", "{tmp}/run", "--out", "{tmp}/comparison"], "augcse.report.compare.compare",
                    "{tmp}/run/eval.json", "{tmp}/comparison", "free memory", NO_TEXT + ["undecodable text"], "{tmp}/run/eval.json"),
    "study": Case(["study", str(GRID), "--output", "{tmp}/study"], "augcse.commands.study.run_all",
                  "{tmp}/study/adapt-curves/snips-simcse-s1/checkpoint-16/model.safetensors", "{tmp}/study",
                  "training.per_device_train_batch_size in the grid's overrides", NO_CSV, "{tmp}/grid.yaml"),
    "reproduce": Case(["reproduce", "simcse", "--seeds", "0", "--output", "{tmp}/reproduce"],
                      "augcse.commands.reproduce.run_all", "{tmp}/reproduce/simcse/unsup-bert-base-s0/eval.json",
                      "{tmp}/reproduce", "training.per_device_train_batch_size=N", NO_CSV, "{tmp}/recipe.yaml"),
    "download": Case(["download", "sts", "--data-dir", "{tmp}/data"], "augcse.commands.download.install",
                     "{tmp}/data/.downloads/STS12.zip", "{tmp}/data", "free memory", NO_TEXT),
}


def _left(folder: Path) -> list[str]:
    """What is on disk under ``folder`` afterwards, its files relative to it (folders end in /)."""
    if not folder.exists():
        return ["(no folder)"]
    return sorted(f"{p.relative_to(folder)}{'/' if p.is_dir() else ''}" for p in folder.rglob("*")) or ["(empty)"]


@pytest.fixture(scope="module")
def record():
    """The rows the matrix collects; written to $AUGCSE_WRITE_FAULT_MATRIX when the module ends."""
    rows: list[dict] = []
    yield rows
    target = os.environ.get(RECORD_ENV)
    if target:
        order = [*FAULTS, "unwritable output", "interrupt (real SIGINT)"]
        rows.sort(key=lambda r: (list(CASES).index(r["command"]), order.index(r["fault"])))
        Path(target).write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.fixture()
def world(tmp_path: Path, tiny_model_dir: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The inputs every command reads: a tiny recipe and its corpus, a text, a run folder with scores."""
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:40]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "in.txt").write_text("One sentence here.\nAnother one there.\nA third sentence.\n")
    recipe = {"name": "r", "output_dir": str(tmp_path / "runs"),
              "model": {"backbone": str(tiny_model_dir), "pooler": "avg", "max_seq_length": 16},
              "data": {"corpus": str(tmp_path / "corpus.txt"), "limit": 32},
              "loss": {"name": "simcse", "params": {"temperature": 0.05}},
              "eval": {"dev": None, "before": "STSBenchmark-dev-original", "after": None},
              "training": {"per_device_train_batch_size": 8, "max_steps": 2}}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    (run / "eval.json").write_text(json.dumps({"after": {"STSBenchmark-dev-original": 50.0}}))
    # the study's and the reproduction's inputs are checked by their own tests (test_study, test_reproduce)
    monkeypatch.setattr("augcse.commands.study.check_inputs", lambda *a, **k: None)
    monkeypatch.setattr("augcse.commands.reproduce.check_inputs", lambda *a, **k: None)
    return tmp_path


def _fault_at(point: str, command: str, make: Callable, path: Path) -> Callable:
    """The fault, raised from ``point``; augment's first shard is built for real, the fault comes on the second."""
    if command != "augment":
        return failing(make, path)
    from augcse.text.augment import cache

    real, calls = cache._build_shard, []

    def second_shard(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs) if len(calls) == 1 else failing(make, path)()
    return second_shard


MATRIX = [(command, kind) for command, case in CASES.items() for kind in case.kinds]


@pytest.mark.parametrize(("command", "kind"), MATRIX, ids=[f"{c}-{k}" for c, k in MATRIX])
def test_fault_matrix(command, kind, world, tiny_model_dir, record, monkeypatch, capsys) -> None:
    case, (make, code, says) = CASES[command], FAULTS[kind]
    fill = {"tmp": world, "model": tiny_model_dir}
    path, output = Path(case.path.format(**fill)), Path(case.output.format(**fill))
    if kind in ("undecodable text", "csv field limit"):
        path = Path(case.input.format(**fill))
    argv = [arg.format(**fill) for arg in case.argv]
    before = {p: p.read_bytes() for p in output.rglob("*") if p.is_file()} if output.is_dir() else {}
    point = case.interrupt_point if kind == "interrupt" and case.interrupt_point else case.point
    monkeypatch.setattr(point, _fault_at(point, command, make, path))
    assert main(argv) == code
    err = _err(capsys)
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert err[0].startswith(f"augcse {command}: "), err
    for part in says:
        assert part.format(path=path, memory=case.memory).lower() in err[0].lower(), err
    left = _left(output)
    record.append({"command": command, "fault": kind, "exit": code,
                   "line": err[0].replace(str(world), "<tmp>").replace(str(tiny_model_dir), "<model>"),
                   "left": left})
    # nothing half-made: the files there before are unchanged, no output was left as if complete
    assert all(p.read_bytes() == data for p, data in before.items()), f"{command} changed a file it had: {left}"
    if command == "train":
        assert not (output / "r").exists(), f"a run folder was left that the same command refuses: {left}"
    elif command == "augment":
        manifest = json.loads((output / "manifest.json").read_text())
        assert not manifest["complete"] and "shards/00000/" in left and "shards/00001/" not in left, left
    elif command == "encode":
        assert not (output / "e.npy").exists(), left
    elif command in ("report", "compare"):
        assert not [name for name in left if name.startswith(("report.", "compare."))], left
    if kind == "interrupt" and command in ("train", "augment", "eval"):  # the same command again is not refused
        monkeypatch.undo()
        if command == "train":
            monkeypatch.setattr("augcse.training.run.evaluate", lambda *a, **k: {"STSBenchmark-dev-original": 1.0})
        if command == "eval":
            monkeypatch.setattr("augcse.evaluation.suite.run_tasks", _scores)
        assert main(argv) == 0, _err(capsys)
        capsys.readouterr()
        if command == "augment":
            assert json.loads((output / "manifest.json").read_text())["complete"]


def _scores(model, names, *args, timings=None, **kwargs) -> dict:
    """run_tasks' answer without the scoring: one score per task."""
    if timings is not None:
        timings.update(loading=0.0, scoring=0.0, processes=1)
    from augcse.evaluation.tasks import get_task

    return {name: {get_task(name).main_metric: 1.0, "seconds": 0.0} for name in names}


@pytest.mark.parametrize("command", list(UNWRITABLE))
def test_unwritable_output_row(command, tmp_path, record, capsys) -> None:
    """The output under a regular file (a real fault, root included): the command lines and checks of
    tests/test_output_probe.py, run here in-process for the record (that test checks nothing heavy loads)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    text = tmp_path / "in.txt"
    text.write_text("One sentence.\n")
    assert main([arg.format(out=a_file / "out", text=text) for arg in UNWRITABLE[command]]) == 2
    err = _err(capsys)
    assert len(err) == 1 and err[0].startswith(f"augcse {command}: error: ") and str(a_file) in err[0], err
    assert a_file.read_text() == "not a folder\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "in.txt"]
    record.append({"command": command, "fault": "unwritable output", "exit": 2,
                   "line": err[0].replace(str(tmp_path), "<tmp>"), "left": ["(nothing written)"]})


def test_a_real_ctrl_c_during_augment_is_one_line_and_the_same_command_completes(tmp_path, record) -> None:
    """SIGINT sent to a running ``augcse augment`` once its first shard is in place: exit 130, one line, the
    cache not marked complete; the same command then completes it."""
    corpus = tmp_path / "in.txt"
    # 1,000 shards of a few milliseconds each: a window of about three seconds
    corpus.write_text("".join(f"Sentence number {i} is here for swapping words.\n" for i in range(4000)))
    out = tmp_path / "cache"
    argv = ["augment", "--corpus", str(corpus), "--augs", "RandomSwap", "--out", str(out), "--shard-size", "4"]
    # SIGINT's default action in the child even when this test runs in a background job (whose shell ignores
    # SIGINT, and Python keeps an ignored SIGINT ignored)
    proc = subprocess.Popen([sys.executable, "-m", "augcse", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (out / "shards" / "00000").is_dir() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    lines = [line for line in stderr.strip().splitlines() if line.strip() and not re.search(r"\d+%\|", line)]
    assert proc.returncode == 130 and len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert lines[0].startswith("augcse augment: interrupted; run the same command again"), lines
    assert not json.loads((out / "manifest.json").read_text())["complete"]
    record.append({"command": "augment", "fault": "interrupt (real SIGINT)", "exit": 130,
                   "line": lines[0], "left": ["manifest.json (not complete)", "shards/ (the finished ones)"]})
    assert main(argv) == 0 and json.loads((out / "manifest.json").read_text())["complete"]
