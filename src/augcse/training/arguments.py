"""The trainer's arguments for a recipe: augcse's defaults, then the recipe's ``training`` keys.

One place says what a run trains with (:data:`TRAINED_WITH`, :func:`effective_training`), so the run's records,
the paper-settings check and the reference page read the same values the trainer receives.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

from augcse.training.recipes.config import Recipe, RecipeError

def _has_accelerator() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


# augcse's defaults for what the trainer trains with; a recipe's ``training`` keys win (the trainer's own
# defaults stand for the rest)
# (stated here, not left to the trainer's version: older ones default to the unfused AdamW, whose rounding differs)
TRAINING_DEFAULTS: dict[str, Any] = dict(num_train_epochs=1, per_device_train_batch_size=64, learning_rate=3e-5,
                                         weight_decay=0.0, lr_scheduler_type="linear", warmup_steps=0,
                                         optim="adamw_torch_fused", adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
                                         max_grad_norm=1.0, dataloader_drop_last=True)
DEV_DEFAULTS: dict[str, Any] = dict(eval_steps=125, load_best_model_at_end=True)  # with a dev task
# the trainer arguments that change what is trained (the rest name outputs, logging cadence or workers)
TRAINED_WITH = ("per_device_train_batch_size", "learning_rate", "learning_rate_mapping", "num_train_epochs",
                "max_steps", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "warmup_ratio", "optim",
                "optim_args", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
                "gradient_accumulation_steps", "fp16", "bf16", "dataloader_drop_last", "batch_sampler",
                "eval_steps", "load_best_model_at_end")


def effective_training(recipe: Recipe) -> dict[str, Any]:
    """The values of :data:`TRAINED_WITH` a run of ``recipe`` trains with: the recipe's, else augcse's
    default, else the trainer's (``eval_steps`` and model selection only with a dev task)."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    trainer = {field.name: (field.default if field.default is not dataclasses.MISSING else field.default_factory())
               for field in dataclasses.fields(SentenceTransformerTrainingArguments)
               if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING}
    ours = {**TRAINING_DEFAULTS, **(DEV_DEFAULTS if recipe.eval.dev is not None else {})}
    values = {}
    for key in TRAINED_WITH:
        if key in ("eval_steps", "load_best_model_at_end") and recipe.eval.dev is None:
            continue
        value = recipe.training.get(key, ours.get(key, trainer.get(key)))
        values[key] = value.value if isinstance(value, enum.Enum) else value
    return values


def training_arguments(recipe: Recipe, has_dev: bool, total_steps: int = 0):
    """The trainer arguments: augcse's defaults, then the recipe's ``training`` keys.

    Every run is resumable: without a dev task a checkpoint is saved about every quarter of the run (at most
    every 500 steps) unless the recipe sets ``save_steps`` or ``save_strategy`` itself.
    """
    from sentence_transformers import SentenceTransformerTrainingArguments

    from augcse.training.schedules import CHECKS

    args: dict[str, Any] = dict(
        **TRAINING_DEFAULTS,
        logging_steps=10,
        save_total_limit=2,
        report_to="none",
        seed=recipe.seed,
        data_seed=recipe.seed,
        disable_tqdm=False,
        # without an accelerator, say so: torchrun/accelerate then run CPU processes as real DDP
        use_cpu=not _has_accelerator(),
    )
    if has_dev:
        args.update(eval_strategy="steps", save_strategy="steps", greater_is_better=True, **DEV_DEFAULTS)
    else:
        args.update(save_strategy="steps", save_steps=max(1, min(500, math.ceil(total_steps / 4))))
    args.update(recipe.training)
    if has_dev:
        args.setdefault("save_steps", args["eval_steps"])
        args.setdefault("metric_for_best_model", "eval_dev_score")
    schedule = None
    if args.get("lr_scheduler_type") in CHECKS:  # one of augcse's schedules: the trainer runs it as constant
        name, kwargs = args["lr_scheduler_type"], args.pop("lr_scheduler_kwargs", None)
        try:
            CHECKS[name](kwargs)
        except ValueError as exc:
            raise RecipeError(str(exc)) from None
        schedule, args["lr_scheduler_type"] = (name, kwargs), "constant"
    try:
        arguments = SentenceTransformerTrainingArguments(output_dir=str(recipe.run_dir), **args)
    except (ValueError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RecipeError(f"recipe section 'training': {first}") from None
    arguments.augcse_schedule = schedule
    return arguments
