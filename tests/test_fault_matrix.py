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
from collections.abc import Callable
from pathlib import Path

import pytest

from augcse.commands.main import main

LATIN1 = "text,label\nun café,boisson\n".encode("latin-1")  # byte 0xe9 at offset 21


def _err(capsys: pytest.CaptureFixture) -> list[str]:
    """The stderr lines a command printed, progress bars and log lines aside."""
    lines = capsys.readouterr().err.strip().splitlines()
    return [line for line in lines if not line.startswith(("Loading weights", "20")) and "it/s]" not in line]


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
