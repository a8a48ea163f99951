"""Every rank resumes from rank 0's decision about the run folder, never from its own look at it.

Two gloo processes whose folders answer differently (as a folder does while rank 0 empties it or finishes a
checkpoint): both must end with rank 0's answer, and rank 1 must not look at all. The race this guards against
is rare in a real restart, so it is forced here instead of waited for.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import torch.multiprocessing as mp


class _Folder:
    """A run folder whose answer depends on the rank asking."""

    def __init__(self, rank: int, refuse: bool) -> None:
        self.rank, self.refuse, self.asked = rank, refuse, False

    def claim(self, recipe: dict, resume, overwrite) -> Path | None:
        from augcse.training.rundir import RunFolderError

        self.asked = True
        if self.refuse and self.rank == 0:
            raise RunFolderError("--auto-resume: rank 0 refuses this folder")
        return Path(f"/runs/x/checkpoint-{8 if self.rank == 0 else 4}")


class _Recipe:
    def to_dict(self) -> dict:
        return {}


def _rank(rank: int, port: int, out: str, refuse: bool) -> None:
    import torch.distributed as dist

    from augcse.training import ranks
    from augcse.training.rundir import RunFolderError

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    ranks.join_process_group = lambda recipe: None  # the group is set up above
    folder = _Folder(rank, refuse)
    try:
        answer = str(ranks.agreed_checkpoint(folder, _Recipe(), resume="auto", overwrite=False))
    except RunFolderError as exc:
        answer = f"refused: {exc}"
    Path(out, f"rank{rank}.json").write_text(json.dumps({"answer": answer, "asked": folder.asked}))
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path: Path, refuse: bool) -> list[dict]:
    mp.spawn(_rank, args=(_free_port(), str(tmp_path), refuse), nprocs=2, join=True)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.parametrize("refuse", [False, True], ids=["resume", "refusal"])
def test_every_rank_takes_rank_0s_decision_and_only_rank_0_looks(tmp_path, refuse) -> None:
    first, second = _run(tmp_path, refuse)
    expected = "refused: --auto-resume: rank 0 refuses this folder" if refuse else "/runs/x/checkpoint-8"
    assert first == {"answer": expected, "asked": True}
    assert second == {"answer": expected, "asked": False}
