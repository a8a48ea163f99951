"""Peak memory and step time of SimCSE with and without gradient caching, at the papers' batch sizes.

A shape-identical, randomly initialised encoder (``bert-base``: 12 layers × 768; ``large``: 24 layers ×
1024, roberta-large's shape on BERT's vocabulary), CLS pooling and SimCSE's train-only MLP, batches of
random 32-token sentences (each encoded twice: the two dropout views), AdamW, bf16 autocast on a GPU.
Every configuration runs in its own process, so peak memory is its own: ``torch.cuda.max_memory_allocated``
on a GPU, the process's peak RSS on a CPU. Before timing, the cached gradient is checked against the
uncached one on the same batch (dropout off, float32).

    python benchmarks/grad_cache.py --shape bert-base --batches 512,1024 --mini-batches 0,64,128 --out grad_cache.json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPES = {"bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
          "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)}
VOCAB = 30522
TOKENS = 32


def build(shape: str, folder: Path):
    """A SentenceTransformer (random BERT of ``shape``, CLS pooling) saved to and loaded from ``folder``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                *(f"w{i}" for i in range(VOCAB - 5))]) + "\n")
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)
    BertModel(BertConfig(vocab_size=VOCAB, **SHAPES[shape])).save_pretrained(folder)
    encoder = Transformer(str(folder), max_seq_length=TOKENS)
    return SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "cls")])


def batch(size: int, device) -> dict:
    import torch

    ids = torch.randint(5, VOCAB, (size, TOKENS), device=device)
    ids[:, 0], ids[:, -1] = 2, 3
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}


def check_equal(model, device) -> float:
    """Largest relative difference between cached and uncached encoder gradients (dropout off, float32)."""
    import torch

    from augcse.losses import SimCSELoss

    model.eval()
    features = batch(64, device)
    grads = []
    for size in (None, 16):
        torch.manual_seed(0)
        loss = SimCSELoss(model, head="mlp", **({"mini_batch_size": size} if size else {})).to(device)
        loss.bind(["anchor"])
        model.zero_grad()
        sum(loss([features]).values()).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    model.train()
    return float((grads[0] - grads[1]).abs().max() / grads[0].abs().max())


def one(args) -> dict:
    """One configuration, in this process."""
    import torch

    from augcse.losses import SimCSELoss

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with tempfile.TemporaryDirectory() as folder:
        model = build(args.shape, Path(folder)).to(device)
    out = {"shape": args.shape, "batch": args.batch, "mini_batch": args.mini_batch or None, "device": str(device),
           "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None}
    if args.check:
        out["max_relative_gradient_difference"] = check_equal(model, device)
    loss = SimCSELoss(model, head="mlp", **({"mini_batch_size": args.mini_batch} if args.mini_batch else {})).to(device)
    loss.bind(["anchor"])
    optimizer = torch.optim.AdamW([*model.parameters(), *loss.head.parameters()], lr=1e-5)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16)
    times = []
    try:
        for index in range(args.steps + 1):
            features = batch(args.batch, device)
            if device.type == "cuda":
                torch.cuda.synchronize()
                if index == 1:
                    torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            with autocast:
                value = torch.stack(list(loss([features]).values())).sum()
            value.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if index:  # the first step warms up (allocator, kernels)
                times.append(time.perf_counter() - start)
    except torch.OutOfMemoryError:
        return {**out, "oom": True}
    step = sum(times) / len(times)
    peak = (torch.cuda.max_memory_allocated() if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {**out, "oom": False, "step_s": round(step, 4), "sentences_per_s": round(args.batch / step, 1),
            "peak_gib": round(peak / 2**30, 2), "peak_kind": "cuda max allocated" if device.type == "cuda" else "RSS"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="bert-base")
    parser.add_argument("--batches", default="512,1024")
    parser.add_argument("--mini-batches", default="0,64,128", help="0: no gradient caching")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--no-bf16", dest="bf16", action="store_false")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mini-batch", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args)), flush=True)
        return
    rows = []
    first = True
    for size in map(int, args.batches.split(",")):
        for mini in map(int, args.mini_batches.split(",")):
            command = [sys.executable, __file__, "--one", "--shape", args.shape, "--batch", str(size),
                       "--mini-batch", str(mini), "--steps", str(args.steps), *([] if args.bf16 else ["--no-bf16"]),
                       *(["--check"] if first and mini else [])]
            first = first and not mini
            result = subprocess.run(command, capture_output=True, text=True)
            row = (json.loads(result.stdout.strip().splitlines()[-1]) if result.returncode == 0
                   else {"shape": args.shape, "batch": size, "mini_batch": mini or None, "error": result.stderr[-500:]})
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
