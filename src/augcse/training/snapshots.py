"""The candidates of one ``augcse adapt`` run: the weights at step 0 and after each budget step, saved by a
``TrainerCallback`` into ``run_dir/candidates/step-N.safetensors`` as training passes them (a resumed run keeps
those saved before its checkpoint)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

CANDIDATES = "candidates"


def snapshot_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CANDIDATES / f"step-{step}.safetensors"


class Snapshots(TrainerCallback):
    """Saves the model's weights at step 0 and after each budget step to ``run_dir/candidates/step-N.safetensors``."""

    def __init__(self, budgets: Sequence[int], run_dir: Path) -> None:
        self.budgets, self.run_dir = set(budgets), Path(run_dir)

    def _save(self, model, step: int) -> None:
        from safetensors.torch import save_file

        path = snapshot_path(self.run_dir, step)
        if step == 0 and path.is_file():
            return  # a resumed run: the starting weights were saved by its first part
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(tmp))
        tmp.replace(path)

    def on_train_begin(self, args, state, control, model=None, **kwargs: Any):
        if state.is_world_process_zero and state.global_step == 0:
            self._save(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs: Any):
        if state.global_step in self.budgets and state.is_world_process_zero:
            self._save(model, state.global_step)


def load_snapshot(run_dir: Path, step: int) -> dict:
    """The weights saved at ``step`` (0: the starting model)."""
    from safetensors.torch import load_file

    return load_file(str(snapshot_path(run_dir, step)))
