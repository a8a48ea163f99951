"""Two ``augcse augment`` into one ``--out`` do not collide: the second is refused in one line naming the first's
process, as a second ``train`` into one run folder is."""

from __future__ import annotations

import os

from augcse.commands.main import main
from augcse.core.folder_lock import folder_lock


def test_second_augment_into_a_held_folder_is_refused(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("The cat sat on the mat.\nA man plays a guitar.\n")
    out = tmp_path / "cache"
    with folder_lock(out, "--out"):  # the first augment, still building
        assert main(["augment", "--corpus", str(corpus), "--out", str(out), "--augs", "RandomSwap"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--out {out} is in use by another augcse command (PID {os.getpid()})" in err[0], err
    # once the first is done the folder is free, and no lock file is left behind
    assert main(["augment", "--corpus", str(corpus), "--out", str(out), "--augs", "RandomSwap"]) == 0
    assert not (out / ".lock").exists()
