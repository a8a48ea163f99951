"""Run by tests/test_distributed.py under ``torchrun --nproc_per_node 2`` (gloo); imported for the reference.

``MODEL OUT [ARGS…]``: every loss configuration of :data:`CASES` on one rank's share of a fixed batch
(:func:`all_cases` in one process: the whole batch). Writes OUT/rank<r>.pt: per case, each loss component
(averaged over ranks) and the parameter gradients (averaged over ranks, as DDP does for the model).
Components that a loss computes per process (``local``) are given, by the one-process reference, as the
mean over the two halves of the batch, each half seeded as its rank is.

Then, given ARGS, ``augcse train ARGS…`` in the same processes; afterwards each rank saves the loss's own
parameters (train-only heads) to OUT/heads<r>.pt.

``- OUT ARGS…`` (MODEL ``-``): ``augcse train ARGS…`` alone, as ``torchrun -m augcse train`` runs it (augcse sets
up the process group), with the fault named by ``$DIST_FAULT`` (``KIND:RANK:STEP``, :func:`inject`) and the
files each rank writes recorded in OUT/writes<r>.json (:func:`record_writes`).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from augcse.losses import (AugCSELoss, CARDSLoss, CompositeLoss, ConSERTLoss, DeCLUTRLoss, DiffCSELoss, ESimCSELoss,
                           MLMLoss, PromptBERTLoss, SDALoss, SimCSELoss, VaSCLLoss)
from augcse.models.poolers import build_sentence_transformer

SENTENCES = [
    "a man is playing a guitar .", "a woman is slicing an onion .", "the stock market fell sharply today .",
    "two dogs run through the snow .", "the president gave a speech .", "a child rides a horse .",
    "rain is expected tomorrow .", "he cooked pasta for dinner .",
]
N = len(SENTENCES)
SEED = 7


def column(name: str, i: int) -> str:
    """The text of row ``i`` (global index) in column ``name``; every column differs from the anchor."""
    s = SENTENCES[i]
    if name == "anchor":
        return s
    if name == "positive":
        return "well , " + s
    if name == "augmented":
        return s.replace(" a ", " one ") + " !"
    if name == "negation":
        return "it is not true that " + s
    if name.startswith("negative"):
        return " ".join(reversed(SENTENCES[(i + 3) % N].split()))
    if name.startswith("retrieved"):
        # another row's anchor (rows 0-2 on rank 0 retrieve rows 5-7's on rank 1 and back: the id mask
        # crosses processes), and for row 2 its own anchor
        shift = 5 if name == "retrieved" else 6
        return s if (i == 2 and name == "retrieved") else SENTENCES[(i + shift) % N]
    raise KeyError(name)


@dataclass
class Case:
    build: Callable[..., torch.nn.Module]
    columns: tuple[str, ...]
    labels: bool = False
    local: frozenset[str] = field(default_factory=frozenset)  # components computed per process
    pooler: str = "avg"  # the model the case embeds with (PromptBERT's needs the prompt pooler)


CASES: dict[str, Case] = {
    "simcse-none": Case(lambda m: SimCSELoss(m, head="none"), ("anchor", "positive")),
    "simcse-mlp": Case(lambda m: SimCSELoss(m, head="mlp"), ("anchor", "positive")),
    "simcse-dropout-positive": Case(lambda m: SimCSELoss(m, head="mlp"), ("anchor",)),
    "simcse-hard-negatives": Case(lambda m: SimCSELoss(m, head="mlp", hard_negative_weight=math.log(2.0)),
                                  ("anchor", "positive", "negative", "negative_2")),
    "simcse-symmetric": Case(lambda m: SimCSELoss(m, head="mlp", symmetric=True), ("anchor", "positive", "negative")),
    # the two cases above with keys kept per process: the reference is the mean over the halves
    "simcse-hard-negatives-no-gather": Case(
        lambda m: SimCSELoss(m, head="mlp", hard_negative_weight=math.log(2.0), gather_across_devices=False),
        ("anchor", "positive", "negative", "negative_2"), local=frozenset({"contrastive"})),
    "simcse-symmetric-no-gather": Case(lambda m: SimCSELoss(m, head="mlp", symmetric=True, gather_across_devices=False),
                                       ("anchor", "positive", "negative"), local=frozenset({"contrastive"})),
    "sda-diag": Case(lambda m: SDALoss(m, head="mlp"), ("anchor", "positive", "negation")),
    "sda-all-symmetric": Case(lambda m: SDALoss(m, head="mlp", neg_block="all", symmetric=True),
                              ("anchor", "positive", "negation")),
    "augcse-discriminator": Case(lambda m: AugCSELoss(m, augmentations=2, head="mlp"),
                                 ("anchor", "augmented"), labels=True),
    "augcse-bool": Case(lambda m: AugCSELoss(m, augmentations=2, variant="bool", head="none"),
                        ("anchor", "augmented"), labels=True),
    "augcse-positive-symmetric": Case(lambda m: AugCSELoss(m, augmentations=2, variant="positive", head="mlp"),
                                      ("anchor", "augmented"), labels=True),
    "augcse-negative": Case(lambda m: AugCSELoss(m, augmentations=2, variant="negative", head="mlp",
                                                 hard_negative_weight=-1.0), ("anchor", "augmented")),
    "cards-id-mask": Case(lambda m: CARDSLoss(m, head="mlp"), ("anchor", "positive", "retrieved", "retrieved_2")),
    "cards-no-mask": Case(lambda m: CARDSLoss(m, head="mlp", mask_own_text=False),
                          ("anchor", "positive", "retrieved", "retrieved_2")),
    "cards-retrieval-only": Case(lambda m: CARDSLoss(m, head="mlp"), ("anchor", "retrieved")),
    "cards-symmetric": Case(lambda m: CARDSLoss(m, head="mlp", mask_own_text=False, symmetric=True),
                            ("anchor", "positive", "retrieved")),
    # VaSCL's neighbours and virtual views come from each process's own rows (the instance term is gathered)
    "vascl": Case(lambda m: VaSCLLoss(m, topk=2, eps=1.0, detach=False, head="vascl"), ("anchor",),
                  local=frozenset({"neighbourhood"})),
    # the compared methods: ESimCSE's first step (empty queue) gathers its repetition positives; ConSERT's
    # two-way NT-Xent (no random augmentation, so a rank and the reference embed alike); DeCLUTR's spans;
    # the MLM term is per process, its masks drawn alike by a rank and by the reference's half
    "esimcse": Case(lambda m: ESimCSELoss(m, head="mlp", queue_size=4, momentum=0.5), ("anchor", "positive")),
    "consert": Case(lambda m: ConSERTLoss(m, augment_1="none", augment_2="none", scale=1.0), ("anchor",)),
    "declutr": Case(lambda m: DeCLUTRLoss(m), ("anchor", "positive")),
    "mlm": Case(lambda m: MLMLoss(m, head_init="fresh"), ("anchor",), local=frozenset({"mlm"})),
    # DiffCSE: the contrastive part gathered, the replaced-token detection per process (generator: the same
    # tiny encoder as a masked LM, its fresh head seeded alike everywhere)
    "diffcse": Case(lambda m: DiffCSELoss(m, head="mlp", generator=GENERATOR[0]), ("anchor",), local=frozenset({"rtd"})),
    "promptbert-denoise": Case(lambda m: PromptBERTLoss(m, head="mlp"), ("anchor",), pooler="prompt"),
    "promptbert-one-template": Case(lambda m: PromptBERTLoss(m, head="mlp", denoise=False, different_template=False),
                                    ("anchor", "positive"), pooler="prompt"),
    "composite": Case(lambda m: CompositeLoss(m, terms=[
        {"loss": "sda", "params": {"head": "mlp"}},
        {"loss": "cards", "inputs": {"positive": "~anchor"}, "weight": 0.5, "params": {"head": "none"}},
    ]), ("anchor", "positive", "negation", "retrieved")),
}


def run_case(model, case: Case, rows: range) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """The case's loss (fresh head, seeded) on ``rows``; returns the loss module and its components."""
    torch.manual_seed(1)  # the heads' initialisation, identical on every rank
    loss_fn = case.build(model)
    loss_fn.bind([*case.columns, *(["label"] if case.labels else [])])
    loss_fn.eval()  # no dropout anywhere: runs are comparable exactly
    features = [model.preprocess([column(c, i) for i in rows]) for c in case.columns]
    labels = torch.tensor([i % 3 for i in rows]) if case.labels else None
    torch.manual_seed(SEED)  # VaSCL's random start, drawn alike by a rank and by the reference's half
    return loss_fn, loss_fn(features, labels)


def gradients(loss_fn: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in loss_fn.named_parameters() if p.grad is not None}


def reference(model, case: Case) -> dict:
    """One process: global components on the whole batch, local ones as the mean over the two halves."""
    loss_fn, parts = run_case(model, case, range(N))
    values = {k: v.detach() for k, v in parts.items() if k not in case.local}
    total = sum((v for k, v in parts.items() if k not in case.local), torch.zeros(()))
    model.zero_grad(set_to_none=True)
    if total.requires_grad:
        total.backward()
    grads = gradients(loss_fn)
    for half in (range(0, N // 2), range(N // 2, N)) if case.local else ():
        model.zero_grad(set_to_none=True)
        half_fn, parts = run_case(model, case, half)
        (sum(v for k, v in parts.items() if k in case.local) / 2).backward()
        for k in case.local:
            values[k] = values.get(k, 0) + parts[k].detach() / 2
        for name, grad in gradients(half_fn).items():
            grads[name] = grads[name] + grad if name in grads else grad
    model.zero_grad(set_to_none=True)
    return {"components": values, "grads": grads}


def distributed(model, case: Case, rank: int, world: int) -> dict:
    per_rank = N // world
    model.zero_grad(set_to_none=True)
    loss_fn, parts = run_case(model, case, range(rank * per_rank, (rank + 1) * per_rank))
    sum(parts.values()).backward()
    grads = gradients(loss_fn)
    for grad in grads.values():
        dist.all_reduce(grad)
        grad /= world
    values = {}
    for key, value in parts.items():
        value = value.detach().clone()
        dist.all_reduce(value)
        values[key] = value / world
    model.zero_grad(set_to_none=True)
    return {"components": values, "grads": grads}


GENERATOR: list[str] = []  # DiffCSE's generator, a masked-LM folder (all_cases' ``generator``)


def all_cases(model_dir: str, generator: str, rank: int = 0, world: int = 1) -> dict[str, dict]:
    """Every case in float64 (so two runs agree to float64 rounding); the global dtype and RNG are restored."""
    GENERATOR[:] = [generator]
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the heads too
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            models = {pooler: build_sentence_transformer(model_dir, pooler, 16 if pooler == "avg" else 48).double()
                      for pooler in dict.fromkeys(case.pooler for case in CASES.values())}  # distinct vectors
            return {name: distributed(models[case.pooler], case, rank, world) if world > 1
                    else reference(models[case.pooler], case) for name, case in CASES.items()}
    finally:
        torch.set_default_dtype(dtype)


def inject(fault: str, out: str) -> None:
    """Make ``KIND`` happen on rank ``RANK`` at training step ``STEP`` (1-based), writing OUT/fault.time then:
    ``nan`` a NaN loss (through the loss's output, as tests/test_nonfinite.py), ``raise`` a RuntimeError in the
    loss's forward pass, ``enospc`` a full disk while ``checkpoint-STEP`` is saved (torch.save raises ENOSPC)."""
    import errno
    import time

    import augcse.training.build as training

    kind, rank, step = fault.split(":")
    if int(os.environ["RANK"]) != int(rank):
        return

    def fired() -> None:
        with open(os.path.join(out, "fault.time"), "w") as handle:
            handle.write(repr(time.time()))

    if kind == "enospc":
        real_save = torch.save

        def full_disk(obj, f, *args, **kwargs):
            if f"checkpoint-{step}" in str(f):
                fired()
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_save(obj, f, *args, **kwargs)

        torch.save = full_disk
        return
    build_loss = training.build_loss

    def faulty(recipe, model):
        loss = build_loss(recipe, model)
        calls = [0]

        def hook(module, inputs, output):
            if not module.training:
                return None
            calls[0] += 1
            if calls[0] != int(step):
                return None
            fired()
            if kind == "raise":
                raise RuntimeError(f"injected fault at step {step}")
            return {key: value * float("nan") for key, value in output.items()}

        loss.register_forward_hook(hook)  # before the guard's: it sees the poisoned output
        return loss

    training.build_loss = faulty


def record_writes(out: str) -> None:
    """Every path this process opens for writing, creates, renames or removes (Python's audit events, and
    torch.save and safetensors' writer, whose files are opened in C++), saved to OUT/writes<r>.json at exit."""
    import atexit
    import json

    import safetensors.torch

    written: set[str] = set()
    changes = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree", "os.truncate", "os.symlink"}

    def audit(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], (str, os.PathLike)):
            mode, flags = args[1], args[2]
            if (mode and any(c in str(mode) for c in "wax+")) or (isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)):
                written.add(os.path.abspath(args[0]))
        elif event in changes and args and isinstance(args[0], (str, os.PathLike)):
            written.add(os.path.abspath(args[0]))
            if event == "os.rename":  # os.replace too: a file written atomically is written under its final name
                written.add(os.path.abspath(args[1]))

    def wrap(module, name: str) -> None:
        real = getattr(module, name)

        def recorded(obj, f, *args, **kwargs):
            if isinstance(f, (str, os.PathLike)):
                written.add(os.path.abspath(f))
            return real(obj, f, *args, **kwargs)

        setattr(module, name, recorded)

    sys.addaudithook(audit)
    wrap(torch, "save")
    wrap(safetensors.torch, "save_file")
    rank = os.environ["RANK"]
    atexit.register(lambda: open(os.path.join(out, f"writes{rank}.json"), "w").write(json.dumps(sorted(written))))


def main(model_dir: str, out: str, train_args: list[str]) -> int:
    """The loss cases on this rank, then (given arguments) ``augcse train`` in the same process group."""
    if model_dir == "-":
        from augcse.commands.main import main as cli

        record_writes(out)
        if os.environ.get("DIST_FAULT"):
            inject(os.environ["DIST_FAULT"], out)
        return cli(["train", *train_args])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.save(all_cases(model_dir, os.environ["DIST_GENERATOR"], rank, world), os.path.join(out, f"rank{rank}.pt"))
    if not train_args:
        dist.destroy_process_group()
        return 0
    import augcse.training.build as training
    from augcse.commands.main import main as cli

    built = []
    build_loss = training.build_loss

    def keep(recipe, model):
        built.append(build_loss(recipe, model))
        return built[-1]

    training.build_loss = keep
    code = cli(["train", *train_args])
    shared = {id(p) for p in built[0].model.parameters()}
    own = {k: v.detach() for k, v in built[0].named_parameters() if id(v) not in shared}
    torch.save(own, os.path.join(out, f"heads{rank}.pt"))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
