"""Encoding and training against the CPU's own matrix-multiply rate, float32 and bf16, in one run.

1. **GEMM rate**: ``torch.matmul`` at the encoder's shapes (rows = batch × tokens; hidden × hidden,
   hidden × intermediate, intermediate × hidden) on ``--threads`` threads (default: all cores), in
   float32 and in bfloat16. The best float32 figure is the roofline the rest is measured against.
2. **Encoding** (the evaluation path, ``EmbeddingCache``: batches sorted by token count) of ``--sentences``
   STS-B dev sentences, batch ``--batch-size``, on each backend (PyTorch float32, PyTorch bf16 autocast,
   ONNX Runtime, OpenVINO). ``--suite`` also counts the FLOPs of a whole suite's encoding, in batches
   sorted by characters (``SentenceTransformer.encode``'s order) and by tokens (augcse's).
3. **Training**: a SimCSE step (both dropout views in one forward, InfoNCE, backward, AdamW) on
   ``--train-batch`` corpus sentences padded to ``--train-len`` tokens: float32 eager, bf16 autocast,
   and ``torch.compile`` of the encoder (float32 and bf16; compile time reported apart).

FLOPs are counted analytically from the model's config on the padded shapes the model actually
computes: per layer and sequence of ``s`` tokens, ``2·s·h·(4h + 2i) + 4·s²·h`` (Q, K, V and output
projections, the two feed-forward products, scores and weighted values); a training step counts 3×
the forward (the backward pass is two products per forward product). Achieved GFLOP/s and their
fraction of the float32 GEMM rate are printed for every line.

    python benchmarks/roofline.py --data-dir ../shared/data            # about 2-3 min on 2 idle cores
    python benchmarks/roofline.py --data-dir ../shared/data --suite all  # + the floor of encoding --suite all
    python benchmarks/roofline.py --data-dir ../shared/data --sentences 256 --train-steps 2 --no-compile
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch

from augcse.assets.resolve import data_dir as resolve_data_dir
from augcse.assets.resolve import resolve_data
from augcse.text.corpus import read_corpus
from augcse.commands.encode import load_model
from augcse.evaluation.backends import check_backend, use_backend
from augcse.evaluation.encoding import NATIVE_BF16_FLAGS, EmbeddingCache, cpu_flags, token_sorted
from augcse.evaluation.tasks import get_task, load_builtin_tasks, resolve_tasks
from augcse.losses.infonce import KeyBlock, info_nce

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def forward_flops(config, batch: int, tokens: int) -> float:
    """Multiply-add FLOPs (×2) of one encoder forward over ``batch`` sequences padded to ``tokens``."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_sequence = 2 * tokens * h * (4 * h + 2 * i) + 4 * tokens * tokens * h
    return float(layers * batch * per_sequence)


def timed(fn: Callable[[], object], min_seconds: float = 0.3) -> float:
    """Seconds per call of ``fn`` (one warm-up call, then repeated for at least ``min_seconds``)."""
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def gemm_rates(config, rows: int) -> dict[str, dict[str, float]]:
    """GFLOP/s of ``rows × k @ k × n`` at the encoder's three weight shapes, float32 and bfloat16."""
    h, i = config.hidden_size, config.intermediate_size
    shapes = {f"{rows}x{h}@{h}x{h}": (h, h), f"{rows}x{h}@{h}x{i}": (h, i), f"{rows}x{i}@{i}x{h}": (i, h)}
    rates: dict[str, dict[str, float]] = {}
    for dtype in (torch.float32, torch.bfloat16):
        name = str(dtype).removeprefix("torch.")
        for label, (k, n) in shapes.items():
            a, b = torch.randn(rows, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
            seconds = timed(lambda: torch.matmul(a, b))
            rates.setdefault(label, {})[name] = 2 * rows * k * n / seconds / 1e9
    return rates


def padded_flops(model, batches: list[list[str]]) -> float:
    """Encoder FLOPs of ``batches`` as the model pads them (each batch to its longest sentence)."""
    config = model[0].auto_model.config
    return sum(forward_flops(config, *model.preprocess(batch)["input_ids"].shape) for batch in batches)


def batched(order: list[str], batch_size: int) -> list[list[str]]:
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def encoding_run(model, sentences: list[str], batch_size: int, precision,
                 by_characters: bool = False) -> tuple[float, float]:
    """(seconds, FLOPs) of encoding ``sentences`` as ``augcse eval`` does (:class:`EmbeddingCache`: batches
    sorted by token count), or with ``by_characters`` as ``SentenceTransformer.encode`` batches them on its
    own (sorted by characters); FLOPs on the padded batches each way forms."""
    order = sorted(sentences, key=len) if by_characters else token_sorted(model, sentences)
    flops = padded_flops(model, batched(order, batch_size))
    with precision:
        EmbeddingCache(model, batch_size=batch_size).encode(sentences[:batch_size])  # warm-up
        begin = time.perf_counter()
        if by_characters:
            model.encode(sentences, batch_size=batch_size)
        else:
            EmbeddingCache(model, batch_size=batch_size).encode(sentences)
    return time.perf_counter() - begin, flops


def suite_flops(model, suite: str, root, batch_size: int) -> tuple[list[str], float, float]:
    """(distinct sentences, FLOPs in batches sorted by characters, FLOPs in batches sorted by tokens) of
    encoding every sentence of ``suite``: sentence-transformers' own order, and ``augcse eval``'s."""
    tasks = [get_task(n) for n in resolve_tasks(suite)]
    distinct = sorted({s for t in tasks for s in t.sentences(t.load(root))})
    by_chars = padded_flops(model, batched(sorted(distinct, key=len), batch_size))
    return distinct, by_chars, padded_flops(model, batched(token_sorted(model, distinct), batch_size))


def training_step(encoder: Callable, batch: dict[str, torch.Tensor], optimizer) -> None:
    """One SimCSE step: the batch's two dropout views in one forward, mean pooling, InfoNCE (τ 0.05), AdamW."""
    features = {k: torch.cat([v, v]) for k, v in batch.items()}
    hidden = encoder(**features).last_hidden_state
    mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    views = pooled.float().chunk(2)
    info_nce(views[0], [KeyBlock(views[1], "all")], temperature=0.05).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def training_run(model_name: str, batch: dict[str, torch.Tensor], steps: int, bf16: bool,
                 compile_: bool) -> tuple[float, float]:
    """(seconds per step, compile/warm-up seconds) of ``steps`` SimCSE steps on a fresh copy of the model."""
    model = load_model(model_name)
    encoder = model[0].auto_model.train()
    run = torch.compile(encoder) if compile_ else encoder
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
    precision = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with precision:
        begin = time.perf_counter()
        training_step(run, batch, optimizer)  # warm-up (and compilation)
        warm = time.perf_counter() - begin
        begin = time.perf_counter()
        for _ in range(steps):
            training_step(run, batch, optimizer)
    return (time.perf_counter() - begin) / steps, warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--data-dir", default=None, help="data directory (default: $AUGCSE_DATA)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    ap.add_argument("--sentences", type=int, default=2048,
                    help="sentences encoded per backend: STS-B dev's, or drawn from --suite when given")
    ap.add_argument("--batch-size", type=int, default=128, help="encoding batch")
    ap.add_argument("--backends", default="torch,torch-bf16,onnx,openvino",
                    help="encoding lines: backends of augcse eval --backend, and torch-bf16 (autocast)")
    ap.add_argument("--train-batch", type=int, default=64, help="sentences per SimCSE step (2 views each)")
    ap.add_argument("--train-len", type=int, default=32, help="tokens per training sentence (SimCSE: 32)")
    ap.add_argument("--train-steps", type=int, default=3, help="timed steps per training line")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile lines")
    ap.add_argument("--suite", default=None, help="also count the FLOPs of encoding this suite (e.g. all) and "
                                                  "the time that takes at the float32 GEMM rate")
    args = ap.parse_args()
    for name in args.backends.split(","):
        check_backend(name.removesuffix("-bf16"))
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    root = resolve_data_dir(args.data_dir)
    load_builtin_tasks()
    task = get_task("STSBenchmark-dev")
    sentences = sorted(set(task.sentences(task.load(root))))[:args.sentences]
    corpus, _ = read_corpus(resolve_data("corpus/wiki1m_for_simcse.first11914.txt", root), limit=args.train_batch)

    model = load_model(args.model)
    config = model[0].auto_model.config
    flags = cpu_flags()
    cpu = next((line.partition(":")[2].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() else ""
    isa = [f for f in ("avx2", "fma", "avx512f", *NATIVE_BF16_FLAGS) if f in flags]
    print(f"# roofline: {args.model} ({config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"intermediate {config.intermediate_size}); {cpu}; {threads} threads; torch {torch.__version__}; "
          f"ISA {' '.join(isa) or 'unknown'}")

    rows = args.batch_size * 24  # an encoding batch of typical STS-B length
    rates = gemm_rates(config, rows)
    print("\n## GEMM (torch.matmul)\n| shape | float32 GFLOP/s | bf16 GFLOP/s | bf16/float32 |\n|---|---:|---:|---:|")
    for label, r in rates.items():
        print(f"| {label} | {r['float32']:.1f} | {r['bfloat16']:.1f} | {r['bfloat16'] / r['float32']:.2f} |")
    peak = max(r["float32"] for r in rates.values())
    print(f"roofline (best float32): {peak:.1f} GFLOP/s")

    def line(name: str, seconds: float, flops: float, extra: str = "") -> None:
        rate = flops / seconds / 1e9
        print(f"| {name} | {seconds:.2f} | {rate:.1f} | {rate / peak:.0%} | {extra} |")

    if args.suite:
        distinct, by_chars, by_tokens = suite_flops(model, args.suite, root, args.batch_size)
        count = len(distinct)
        print(f"suite {args.suite}: {count} distinct sentences; batches of {args.batch_size} sorted by characters "
              f"{by_chars / 1e12:.1f} TFLOP, sorted by tokens (augcse eval) {by_tokens / 1e12:.1f} TFLOP; at the "
              f"float32 GEMM rate that is {by_tokens / peak / 1e9 / 60:.1f} min, the floor of float32 encoding here")
        sentences = random.Random(0).sample(sorted(distinct), min(args.sentences, len(distinct)))
    source = f"sentences drawn from suite {args.suite}" if args.suite else "STS-B dev sentences"
    print(f"\n## Encoding: {len(sentences)} {source}, batch {args.batch_size}\n"
          "| backend | seconds | GFLOP/s | of float32 GEMM | sentences/s |\n|---|---:|---:|---:|---|")
    seconds, flops = encoding_run(model, sentences, args.batch_size, contextlib.nullcontext(), by_characters=True)
    line("torch, batched by characters (SentenceTransformer.encode; FLOPs of its padding)", seconds, flops,
         f"{len(sentences) / seconds:.0f}")
    for name in args.backends.split(","):
        backend, bf16 = name.removesuffix("-bf16"), name.endswith("-bf16")
        model = use_backend(load_model(args.model), backend)
        precision = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        seconds, flops = encoding_run(model, sentences, args.batch_size, precision)
        line(name, seconds, flops, f"{len(sentences) / seconds:.0f}")

    batch = dict(load_model(args.model).tokenizer(corpus, padding="max_length", truncation=True,
                                                  max_length=args.train_len, return_tensors="pt"))
    flops = 3 * forward_flops(config, 2 * args.train_batch, args.train_len)
    print(f"\n## Training: SimCSE step, {args.train_batch} sentences × 2 views × {args.train_len} tokens, AdamW\n"
          "| mode | seconds/step | GFLOP/s | of float32 GEMM | sentences/s, warm-up s |\n|---|---:|---:|---:|---|")
    modes = [("float32 eager", False, False), ("bf16 autocast eager", True, False)]
    if not args.no_compile:
        modes += [("float32 torch.compile", False, True), ("bf16 autocast torch.compile", True, True)]
    for name, bf16, compile_ in modes:
        seconds, warm = training_run(args.model, batch, args.train_steps, bf16, compile_)
        line(name, seconds, flops, f"{args.train_batch / seconds:.1f}, {warm:.1f}")


if __name__ == "__main__":
    main()
