"""Every command that writes proves its output folder writable before torch or sentence-transformers loads.

Each case runs in a fresh process (this one has torch loaded already): the output is a folder under a regular
file, which no one can create, root included; the report's run folder, which exists, is made read-only by a
probe that fails as a read-only filesystem's would.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from augcse.core import outputs

GRID = Path(__file__).resolve().parents[1] / "src" / "augcse" / "data" / "studies" / "adapt-curves.yaml"
HEAVY = ("torch", "sentence_transformers", "matplotlib")
MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# the command line, with {out} the folder that cannot be written and {text} a one-sentence file
COMMANDS = {
    "train": ["train", "--recipe", "quickstart", "output_dir={out}"],
    "encode": ["encode", MODEL, "{text}", "--out", "{out}/e.npy"],
    "augment": ["augment", "--corpus", "{text}", "--augs", "RandomSwap", "--out", "{out}"],
    "eval": ["eval", MODEL, "--tasks", "STSBenchmark-dev-original", "--save-to", "{out}"],
    "study": ["study", str(GRID), "--output", "{out}"],
    "reproduce": ["reproduce", "simcse", "--output", "{out}"],
    "compare": ["compare", "{text}", "--out", "{out}"],
    "download": ["download", "sts", "--data-dir", "{out}"],
}

RUN = """
import errno, json, pathlib, sys
read_only = {read_only!r}
if read_only:  # a folder that exists but cannot be written, as on a read-only mount (root ignores chmod)
    real = pathlib.Path.write_bytes
    def write_bytes(self, data):
        if str(self).startswith(read_only):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real(self, data)
    pathlib.Path.write_bytes = write_bytes
from augcse.commands.main import main
code = main({argv!r})
print(json.dumps([code, [name for name in {heavy!r} if name in sys.modules]]))
"""


def _run(argv: list[str], read_only: str = "") -> tuple[int, list[str], list[str]]:
    """Exit code, heavy modules loaded, and the stderr lines of ``augcse ARGV`` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", RUN.format(argv=argv, heavy=HEAVY, read_only=read_only)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    return code, heavy, done.stderr.strip().splitlines()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unwritable_output_is_one_line_before_anything_heavy_loads(command, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    text = tmp_path / "in.txt"
    text.write_text("One sentence.\n")
    argv = [arg.format(out=a_file / "out", text=text) for arg in COMMANDS[command]]
    code, heavy, err = _run(argv)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"augcse {command}: error: ") and str(a_file) in err[0], err
    assert heavy == [], f"augcse {command} loaded {heavy} before refusing the output"


def test_a_read_only_run_folder_is_refused_before_the_report_loads(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text("name: run\n")
    code, heavy, err = _run(["report", str(run)], read_only=str(run))
    assert code == 2 and err == [f"augcse report: error: run folder {run}: cannot write there (Read-only file "
                                 "system); choose a writable folder"], err
    assert heavy == [] and list(run.iterdir()) == [run / "recipe.yaml"]


def test_a_probe_cut_short_by_a_full_disk_is_not_left_behind(tmp_path, monkeypatch):
    def half_written(self: Path, data: bytes) -> int:
        with open(self, "wb") as handle:  # created, then the disk fills
            handle.write(data[:1])
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(outputs.Path, "write_bytes", half_written)
    with pytest.raises(ValueError, match=r"^--out .*: cannot write there \(No space left on device\)"):
        outputs.check_writable(tmp_path, "--out")
    assert list(tmp_path.iterdir()) == []


def test_processes_of_one_job_probing_one_new_folder_do_not_remove_it_under_each_other(tmp_path, monkeypatch):
    """Under torchrun every rank probes the same new folder at once; a rank must not remove it while another
    probes (that failed one rank's probe and stopped the job), and a folder another process wrote into stays."""
    from augcse.core.outputs import check_writable

    monkeypatch.setenv("WORLD_SIZE", "2")
    assert check_writable(tmp_path / "runs" / "a", "output_dir").is_dir()
    monkeypatch.delenv("WORLD_SIZE")
    assert check_writable(tmp_path / "single" / "b", "output_dir") and not (tmp_path / "single").exists()
    real_unlink = Path.unlink

    def another_process_writes(self, *args, **kwargs):  # a second process's file appears during the probe
        real_unlink(self, *args, **kwargs)
        (self.parent / "theirs").write_text("x")

    monkeypatch.setattr(Path, "unlink", another_process_writes)
    check_writable(tmp_path / "shared" / "c", "output_dir")
    assert (tmp_path / "shared" / "c" / "theirs").is_file()
