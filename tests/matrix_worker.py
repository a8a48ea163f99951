"""Run by tests/test_recipe_matrix.py under ``torchrun --nproc_per_node 2`` (gloo on CPU): every built-in recipe
family, in turn, in the same two processes (process start and imports paid once).

``TINY MLM CORPUS OUT [RECIPE…]``: for each family's representative recipe (:func:`families`) on the tiny model
and the corpus's lines, from fresh folders under OUT/<recipe>/ (sharing its caches): ``straight`` trains 4 steps; ``stopped`` is stopped after step 2 as SIGTERM
stops a run (a checkpoint, then exit) and resumed with ``--resume`` to step 4; ``cached`` trains 2 steps with
gradient caching when the loss takes it. Each rank writes OUT/matrix<rank>.json as it goes: per recipe, each
mode's outcome (``finished``, ``stopped``, ``not applicable: …``), the steps trained and seconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from augcse.core.schema import RecipeError
from augcse.training.recipes.config import builtin_recipes, load_recipe
from test_recipes_methods import OFFLINE

STEPS, STOP_AT, MINI_BATCH = 4, 2, 2


def family(name: str) -> tuple[str, tuple[str, ...]]:
    """A recipe's family: its loss and its views, in order (what decides what trains and what is built)."""
    recipe = load_recipe(name=name)
    return recipe.loss.name, tuple(view["name"] for view in recipe.data.views)


def families() -> dict[str, tuple[str, tuple[str, ...]]]:
    """One recipe per family of the built-in recipes: a CPU one (``-minilm``, then ``quickstart``) where there is one."""
    chosen: dict[tuple, str] = {}
    for name in sorted(builtin_recipes(), key=lambda n: (not n.endswith("-minilm"), n != "quickstart", n)):
        chosen.setdefault(family(name), name)
    return {name: key for key, name in sorted(chosen.items(), key=lambda item: item[1])}


def overrides(name: str, tiny: str, mlm: str, corpus: Path, out: Path, mode: str) -> list[str]:
    """Tiny model, 64 lines, no periodic checkpoint (a stop saves one), no evaluation, as ``out/mode`` (the modes of a recipe share
    its caches in ``out/.cache``); the offline settings of tests/test_recipes_methods.py, but DeCLUTR's documents
    of four lines with spans of 8 to 32 sub-words (shorter spans leave a 4-span batch with no token masked for
    the composite's MLM term)."""
    recipe = load_recipe(name=name)
    generator = [f"loss.params.generator={mlm}"] if recipe.loss.name == "diffcse" else []
    longer = {"lines_per_document": 1, "min_span_len": 4, "max_span_len": 8}
    views = [{**view, **longer} if view["name"] == "declutr_spans" else view for view in recipe.data.views]
    spans = [f"data.views={json.dumps(views)}"] if views != recipe.data.views else []
    return [f"output_dir={out}", f"name={mode}", f"model.backbone={tiny}", f"data.corpus={corpus}", "data.limit=64",
            "training.per_device_train_batch_size=4", f"training.max_steps={STEPS}", "training.save_steps=1000",
            "training.logging_steps=1", "training.learning_rate=1e-3", "keep_checkpoints=true", "eval.dev=null",
            "eval.before=null", "eval.after=null", *(spans or OFFLINE.get(name, [])), *generator]


class StopAfter(TrainerCallback):
    """Send this process SIGTERM as step ``step`` begins: augcse's own handler then saves and stops after it."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step - 1:
            os.kill(os.getpid(), signal.SIGTERM)


def outcome(summary: dict) -> dict:
    if summary.get("stopped"):
        return {"outcome": "stopped", "steps": int(summary["checkpoint"].rsplit("-", 1)[1])}
    return {"outcome": "finished", "steps": summary["global_step"]}


def main(tiny: str, mlm: str, corpus: str, out: str, only: list[str]) -> int:
    from augcse.training.run import run

    root, rank = Path(out), os.environ["RANK"]
    record: dict[str, dict] = {}
    for name in only or list(families()):
        base = lambda mode: overrides(name, tiny, mlm, Path(corpus), root / name, mode)  # noqa: E731
        modes: dict[str, dict] = {}
        record[name] = modes

        def timed(mode: str, step) -> None:
            started = time.perf_counter()
            modes[mode] = {**step(), "seconds": round(time.perf_counter() - started, 2)}
            (root / f"matrix{rank}.json").write_text(json.dumps(record, indent=1))

        timed("straight", lambda: outcome(run(load_recipe(name=name, overrides=base("straight")))))
        timed("stop", lambda: outcome(run(load_recipe(name=name, overrides=base("stopped")),
                                          callbacks=[StopAfter(STOP_AT)])))
        timed("resume", lambda: outcome(run(load_recipe(name=name, overrides=base("stopped")), resume=True)))
        try:
            cached = load_recipe(name=name, overrides=[*base("cached"), f"loss.params.mini_batch_size={MINI_BATCH}",
                                                       "training.max_steps=2"])
        except RecipeError as exc:  # the loss refuses gradient caching, with its reason
            modes["cached"] = {"outcome": f"not applicable: {exc}"}
            continue
        timed("cached", lambda: outcome(run(cached)))
    (root / f"matrix{rank}.json").write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5], sys.argv[5:]))
