"""Encode each distinct sentence once per model, shared by every task of an evaluation run.

Sentences are deduplicated, sorted by their number of tokens and encoded in batches of equal or
nearly equal length, so almost nothing is padding; the embeddings are kept in memory and, with
``cache_dir``, on disk keyed by the model's fingerprint so a second ``augcse eval`` of the same
model re-encodes nothing.

Why tokens and not characters: batches of 128 of the 279,368 sentences of ``--suite all`` sorted by
characters (what ``SentenceTransformer.encode`` does) pad to 159 TFLOP of encoder work for
all-MiniLM-L6-v2; sorted by tokens they come to 104 TFLOP, within 0.3 % of the unpadded count
(``benchmarks/roofline.py``, docs/SPEED.md).
"""

from __future__ import annotations

import functools
import hashlib
import platform
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm


def model_fingerprint(model: torch.nn.Module) -> str:
    """A hash of the model's weights (sampled) and module structure: changes whenever training changes it."""
    digest = hashlib.sha1(repr(model).encode())
    with torch.no_grad():
        for name, param in sorted(model.state_dict().items()):
            digest.update(name.encode())
            flat = param.detach().reshape(-1)
            step = max(1, flat.numel() // 64)
            digest.update(flat[::step].float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


# CPU flags of native bfloat16 arithmetic, reported beside timings (benchmarks/roofline.py); whether bf16 is
# faster here is measured (:func:`bf16_probe`), since the flags do not say whether PyTorch's kernels use them
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    if platform.system() != "Linux":
        return set()
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("flags"):
                return set(line.partition(":")[2].split())
    return set()


@dataclass(frozen=True)
class Bf16Probe:
    """A short measurement of one transformer-sized matrix product here: float32 against bf16 autocast."""

    float32_ms: float
    bf16_ms: float

    @property
    def speedup(self) -> float:
        """How many times faster bf16 is than float32 (below 1: slower)."""
        return self.float32_ms / self.bf16_ms


@functools.cache
def bf16_probe(rows: int = 2048, width: int = 384, reps: int = 5) -> Bf16Probe:
    """Time ``reps`` products of a (rows × width) by (width × 4·width) matrix, the feed-forward layer of a small
    encoder on a batch of 64 × 32 tokens, in float32 and under CPU bf16 autocast; the best of each.
    About a tenth of a second: measured, because CPU flags do not say whether PyTorch's kernels use them."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(rows, width, generator=generator)
    weight = torch.randn(4 * width, width, generator=generator)

    def best(autocast: bool) -> float:
        times = []
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            torch.nn.functional.linear(inputs, weight)  # warm-up: kernel choice and packing
            for _ in range(reps):
                start = time.perf_counter()
                torch.nn.functional.linear(inputs, weight)
                times.append(time.perf_counter() - start)
        return min(times) * 1000

    return Bf16Probe(best(False), best(True))


def bf16_warning(device: torch.device, option: str = "--bf16") -> str | None:
    """One line when bf16 autocast is slower than float32 here, by :func:`bf16_probe` (a measurement, not
    the CPU's flags). GPUs get no warning. ``option`` is what the user set (``--bf16``, ``training.bf16``)."""
    if device.type != "cpu":
        return None
    probe = bf16_probe()
    if probe.speedup >= 1.0:
        return None
    return (f"warning: {option} is slower than float32 on this CPU (a feed-forward product measured "
            f"{probe.bf16_ms:.1f} ms in bf16, {probe.float32_ms:.1f} ms in float32); drop {option}")


def token_sorted(model, sentences: Iterable[str]) -> list[str]:
    """``sentences`` ordered by the number of tokens ``model`` gives each (after truncation), then by text.

    The order is a pure function of the sentences, so every run pads each one in the same batch and
    float32 embeddings are reproducible to the bit. A model without a tokenizer is ordered by characters.
    """
    unique = sorted(set(sentences))
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not unique:
        return sorted(unique, key=len)
    lengths = tokenizer(unique, truncation=True, max_length=model.max_seq_length, return_length=True,
                        return_attention_mask=False, return_token_type_ids=False)["length"]
    return [s for _, s in sorted(zip(lengths, unique))]


class EmbeddingCache:
    """``encode(sentences) -> np.ndarray`` with every distinct sentence encoded once.

    Args:
        model: a ``SentenceTransformer`` (anything with ``.encode``).
        batch_size: encoding batch size.
        show_progress: show a progress bar while encoding.
        cache_dir: optional folder for an on-disk ``.npz`` cache keyed by the model fingerprint.
    """

    def __init__(
        self,
        model,
        batch_size: int = 64,
        show_progress: bool = False,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.show_progress = show_progress
        self._store: dict[str, np.ndarray] = {}
        self.encoded_count = 0  # sentences actually sent through the model
        self._disk: Path | None = None
        if cache_dir is not None:
            self._disk = Path(cache_dir) / f"{model_fingerprint(model)}.npz"
            if self._disk.is_file():
                with np.load(self._disk, allow_pickle=False) as saved:
                    self._store = dict(zip(saved["sentences"].tolist(), saved["embeddings"]))

    def prefetch(self, sentences: Sequence[str], desc: str = "encoding") -> None:
        """Encode every not-yet-seen sentence in one pass of token-length-sorted batches.

        Each batch goes to ``model.encode`` on its own, so sentence-transformers' own character-length
        sort cannot regroup it. With ``show_progress`` a bar counts sentences and sentences/s.
        """
        missing = token_sorted(self.model, {s for s in sentences if s not in self._store})
        if not missing:
            return
        with tqdm(total=len(missing), desc=desc, unit="sent", disable=not self.show_progress, leave=False) as bar:
            for start in range(0, len(missing), self.batch_size):
                part = missing[start:start + self.batch_size]
                embeddings = self.model.encode(part, batch_size=len(part), show_progress_bar=False,
                                               convert_to_numpy=True)
                self._store.update(zip(part, np.asarray(embeddings, dtype=np.float32)))
                self.encoded_count += len(part)
                bar.update(len(part))
        if self._disk is not None:
            self.save()

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        """Embeddings for ``sentences`` in order (float32, not normalised)."""
        self.prefetch(sentences)
        if not sentences:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._store[s] for s in sentences])

    __call__ = encode

    @property
    def dimension(self) -> int:
        if self._store:
            return next(iter(self._store.values())).shape[0]
        return int(self.model.get_embedding_dimension())

    def save(self) -> None:
        assert self._disk is not None
        self._disk.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self._store)
        tmp = self._disk.with_suffix(".tmp.npz")
        np.savez(tmp, sentences=np.array(keys), embeddings=np.stack([self._store[k] for k in keys]))
        tmp.replace(self._disk)
