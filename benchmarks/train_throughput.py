"""Training throughput: augcse's quickstart setup (SentenceTransformerTrainer + SimCSELoss) against a bare
PyTorch SimCSE loop on the same model, batch, data and optimiser, measured side by side in one run.

Both run the same number of steps; the first ``--warmup`` steps are not timed. The two are alternated
``--rounds`` times and the median ratio is reported (the machine is noisy; ratios are what we compare).

    python benchmarks/train_throughput.py --data-dir ../shared/data --steps 20 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer, TrainerCallback

from augcse.assets.resolve import resolve_data, resolve_model
from augcse.text.corpus import read_corpus

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def bare_loop(sentences: list[str], batch: int, steps: int, warmup: int, lr: float, seed: int) -> float:
    """SimCSE as a plain loop: tokenise, one 2B forward, mean pooling, cosine/τ, cross-entropy, AdamW."""
    torch.manual_seed(seed)
    path = resolve_model(MODEL)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    start = None
    for step in range(steps + warmup):
        if step == warmup:
            start = time.perf_counter()
        texts = sentences[step * batch:(step + 1) * batch]
        enc = tokenizer(texts + texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
        hidden = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        z1, z2 = pooled[:batch], pooled[batch:]
        logits = F.normalize(z1, dim=-1) @ F.normalize(z2, dim=-1).T / 0.05
        loss = F.cross_entropy(logits, torch.arange(batch))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return steps * batch / (time.perf_counter() - start)


class _Clock(TrainerCallback):
    def __init__(self, warmup: int) -> None:
        self.warmup, self.start, self.end = warmup, None, None

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.warmup:
            self.start = time.perf_counter()

    def on_train_end(self, args, state, control, **kwargs):
        self.end = time.perf_counter()


def augcse_trainer(sentences: list[str], batch: int, steps: int, warmup: int, lr: float, seed: int, out: str) -> float:
    """The quickstart recipe's pieces: the same model, pooling, loss and optimiser, through the trainer."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    from augcse.losses import SimCSELoss
    from augcse.models.poolers import build_sentence_transformer

    torch.manual_seed(seed)
    model = build_sentence_transformer(resolve_model(MODEL), "avg", 32)
    data = Dataset.from_dict({"anchor": sentences[: (steps + warmup) * batch]})
    args = SentenceTransformerTrainingArguments(
        output_dir=out, max_steps=steps + warmup, per_device_train_batch_size=batch, learning_rate=lr,
        lr_scheduler_type="constant", weight_decay=0.0, save_strategy="no", report_to="none",
        logging_steps=10, disable_tqdm=True, seed=seed, dataloader_drop_last=True,
    )
    clock = _Clock(warmup)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=SimCSELoss(model),
                                         callbacks=[clock])
    trainer.train()
    return steps * batch / (clock.end - clock.start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("AUGCSE_DATA"))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="/tmp/augcse-bench")
    args = parser.parse_args()
    try:
        corpus = resolve_data("corpus/wiki1m_for_simcse.first11914.txt", args.data_dir)
    except Exception:  # noqa: BLE001 - fall back to the embedded slice without a data directory
        corpus = resolve_data("corpus/wiki_default.txt")
    sentences, _ = read_corpus(corpus, limit=(args.steps + args.warmup) * args.batch)
    rows = []
    for round_ in range(args.rounds):
        bare = bare_loop(sentences, args.batch, args.steps, args.warmup, 3e-5, round_)
        ours = augcse_trainer(sentences, args.batch, args.steps, args.warmup, 3e-5, round_, args.out)
        rows.append({"round": round_, "bare_sent_per_s": bare, "augcse_sent_per_s": ours, "ratio": ours / bare})
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"median_ratio": statistics.median(r["ratio"] for r in rows), "threads": torch.get_num_threads(),
                      "batch": args.batch, "steps": args.steps}))


if __name__ == "__main__":
    main()
