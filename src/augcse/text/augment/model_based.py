"""Rewrites that need neural model weights.

RandomContextualWordAugmentation (any Hugging Face masked LM) and RandomWordEmbAugmentation (input
embeddings of any Hugging Face model) run offline with local folders. DiverseParaphrase,
Casual2Formal and BackTranslation need sequence-to-sequence checkpoints that cannot be had offline
here: they resolve their models through :func:`augcse.assets.resolve.resolve_model` and otherwise fail with
one clear "needs model X" error, and no offline set includes them. Whether the Hugging Face Hub can be
reached is found out once per process (a 3 s connection), so a machine without network names that at once
instead of retrying the Hub for every model.
"""

from __future__ import annotations

import os
import random
import re
import socket
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import urlparse

from augcse.assets.resolve import resolve_model
from augcse.text.augment.base import Augmentation, AugmentationError, Meaning, clean_output, register, rng_for
from augcse.text.augment.text import match_case

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc

NLPAUG = "nlpaug (Ma 2019), added to NL-Augmenter by AugCSE (App. A.2)"
WORD = re.compile(r"^[A-Za-z]+$")


def _load(kind: str, name: str) -> tuple[Any, Any]:
    """(tokenizer, model) for ``name``; an :class:`AugmentationError` naming the model when it cannot load."""
    try:
        return _load_cached(kind, name)
    except AugmentationError:
        raise
    except Exception as exc:  # noqa: BLE001 - any load failure is "model not available"
        raise AugmentationError(
            f"needs model {name!r} ({kind}), which could not be loaded: {type(exc).__name__}: {exc}. "
            "Pass a local folder or a Hugging Face name reachable from this machine."
        ) from exc


@lru_cache(maxsize=1)
def hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the Hugging Face Hub (``HF_ENDPOINT``) cannot be reached from here, or None; asked once per process."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
    return None


@lru_cache(maxsize=4)
def _load_cached(kind: str, name: str) -> tuple[Any, Any]:
    import transformers

    path = resolve_model(name)
    if path == name and not Path(name).expanduser().is_dir() and (reason := hub_unreachable()) is not None:
        raise AugmentationError(f"needs model {name!r}, which is not here, and the Hugging Face Hub cannot be reached "
                                f"({reason}); pass a local folder, or set HF_HUB_OFFLINE=1 on a machine without "
                                "network")
    model = getattr(transformers, kind).from_pretrained(path)
    model.eval()
    return transformers.AutoTokenizer.from_pretrained(path), model


def _pick_words(words: list[str], rng: random.Random, p: float, aug_max: int) -> list[int]:
    cands = [i for i, w in enumerate(words) if WORD.match(w) and len(w) > 1]
    if not cands:
        return []
    k = min(len(cands), aug_max, max(1, int(p * len(words))))
    return sorted(rng.sample(cands, k))


def _split(text: str) -> tuple[list[str], list[str]]:
    """Words with their trailing punctuation kept apart, so "Europe." offers "Europe"."""
    core, tail = [], []
    for token in text.split():
        m = re.match(r"^(.*?)([.,;:!?\"')\]]*)$", token)
        core.append(m.group(1))
        tail.append(m.group(2))
    return core, tail


def _join(core: list[str], tail: list[str]) -> str:
    return " ".join(c + t for c, t in zip(core, tail))


@register
class RandomContextualWordAugmentation(Augmentation):
    """Mask words and fill them with a masked language model."""

    name = "RandomContextualWordAugmentation"
    meaning = Meaning.POSSIBLY.value
    needs = ("model:bert-base-uncased",)
    source = NLPAUG + "; ContextualWordEmbsAug"
    rule = "mask max(1, int(p*n)) words (one mask each) and replace each with a whole word sampled from the MLM's top-k"
    defaults = {"model": "bert-base-uncased", "p": 0.15, "aug_max": 10, "top_k": 5, "batch_size": 32}

    def apply(self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None) -> list[str]:
        import torch

        tok, model = _load("AutoModelForMaskedLM", self.params["model"])
        jobs, outputs = [], list(batch)
        for n, text in enumerate(batch):
            rng = rng_for(seed, self.name, text)
            core, tail = _split(text)
            picked = _pick_words(core, rng, self.params["p"], self.params["aug_max"])
            if picked:
                jobs.append((n, core, tail, picked, rng))
        bs = self.params["batch_size"]
        for start in range(0, len(jobs), bs):
            chunk = jobs[start:start + bs]
            masked = [_join([tok.mask_token if i in p else w for i, w in enumerate(c)], t) for _, c, t, p, _ in chunk]
            enc = tok(masked, return_tensors="pt", padding=True, truncation=True, max_length=256)
            with torch.no_grad():
                logits = model(**enc).logits
            for row, (n, core, tail, picked, rng) in enumerate(chunk):
                positions = (enc["input_ids"][row] == tok.mask_token_id).nonzero().flatten().tolist()
                new = list(core)
                for pos, i in zip(positions, picked):
                    options = _whole_words(tok, logits[row, pos], core[i], self.params["top_k"])
                    if options:
                        new[i] = match_case(core[i], rng.choice(options))
                outputs[n] = clean_output(batch[n], _join(new, tail))
        return outputs


def _whole_words(tok: Any, scores: Any, original: str, k: int) -> list[str]:
    out = []
    for idx in scores.argsort(descending=True)[: 20 * k].tolist():
        word = tok.convert_ids_to_tokens(idx).lstrip("Ġ▁")
        if WORD.match(word) and word.lower() != original.lower() and word not in out:
            out.append(word)
        if len(out) == k:
            break
    return out


@lru_cache(maxsize=2)
def _embedding_index(name: str) -> tuple[list[str], dict[str, int], Any]:
    """Whole-word vocabulary entries and their L2-normalised input embeddings."""
    import torch

    tok, model = _load("AutoModel", name)
    weights = model.get_input_embeddings().weight.detach()
    vocab = tok.get_vocab()
    words = sorted((w for w in vocab if WORD.match(w) and len(w) > 1), key=vocab.get)
    ids = torch.tensor([vocab[w] for w in words])
    matrix = torch.nn.functional.normalize(weights[ids].float(), dim=1)
    return words, {w: i for i, w in enumerate(words)}, matrix


@register
class RandomWordEmbAugmentation(Augmentation):
    """Replace words with their nearest whole-word neighbours in a model's input-embedding space."""

    name = "RandomWordEmbAugmentation"
    meaning = Meaning.POSSIBLY.value
    needs = ("model:sentence-transformers/all-MiniLM-L6-v2",)
    source = NLPAUG + "; WordEmbsAug with GloVe replaced by a transformer's input embeddings (GloVe is not available offline)"
    rule = "replace max(1, int(p*n)) words that are whole vocabulary entries with one of their top-k cosine neighbours"
    defaults = {"model": "sentence-transformers/all-MiniLM-L6-v2", "p": 0.3, "aug_max": 10, "top_k": 5}

    def apply(self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None) -> list[str]:
        words, index, matrix = _embedding_index(self.params["model"])
        out = []
        for text in batch:
            rng = rng_for(seed, self.name, text)
            core, tail = _split(text)
            usable = [i for i, w in enumerate(core) if w.lower() in index]
            if not usable:
                out.append(text)
                continue
            k = min(len(usable), self.params["aug_max"], max(1, int(self.params["p"] * len(core))))
            new = list(core)
            for i in sorted(rng.sample(usable, k)):
                neighbours = _neighbours(self.params["model"], core[i].lower(), self.params["top_k"])
                if neighbours:
                    new[i] = match_case(core[i], rng.choice(neighbours))
            out.append(clean_output(text, _join(new, tail)))
        return out


@lru_cache(maxsize=100_000)
def _neighbours(name: str, word: str, k: int) -> tuple[str, ...]:
    words, index, matrix = _embedding_index(name)
    scores = matrix @ matrix[index[word]]
    best = scores.topk(k + 1).indices.tolist()
    return tuple(words[j] for j in best if words[j] != word)[:k]


class _Seq2Seq(Augmentation):
    """Rewrite with sequence-to-sequence checkpoints (translation, style transfer)."""

    meaning = Meaning.POSSIBLY.value
    prefix = ""

    def generate(self, name: str, texts: list[str], **kwargs: Any) -> list[list[str]]:
        import torch

        tok, model = _load("AutoModelForSeq2SeqLM", name)
        n = kwargs.get("num_return_sequences", 1)
        enc = tok([self.prefix + t for t in texts], return_tensors="pt", padding=True, truncation=True)
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=128, **kwargs)
        decoded = tok.batch_decode(ids, skip_special_tokens=True)
        return [decoded[i * n:(i + 1) * n] for i in range(len(texts))]


@register
class BackTranslation(_Seq2Seq):
    """Translate to German and back (a light paraphrase)."""

    name = "BackTranslation"
    needs = ("model:Helsinki-NLP/opus-mt-en-de", "model:Helsinki-NLP/opus-mt-de-en")
    source = "NL-Augmenter BackTranslation (AugCSE App. A.2; dropped from its pool in App. A.3)"
    rule = "English -> German -> English with MarianMT, beam search"
    defaults = {"forward": "Helsinki-NLP/opus-mt-en-de", "backward": "Helsinki-NLP/opus-mt-de-en"}

    def apply(self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None) -> list[str]:
        german = [c[0] for c in self.generate(self.params["forward"], list(batch), num_beams=4)]
        back = [c[0] for c in self.generate(self.params["backward"], german, num_beams=4)]
        return [clean_output(t, b) for t, b in zip(batch, back)]


@register
class DiverseParaphrase(_Seq2Seq):
    """Back-translation with diverse beam search, one candidate drawn per sentence."""

    name = "DiverseParaphrase"
    needs = ("model:Helsinki-NLP/opus-mt-en-de", "model:Helsinki-NLP/opus-mt-de-en")
    source = "NL-Augmenter DiverseParaphrase (Kumar et al. 2019) via AugCSE App. A.2"
    rule = ("back-translation; the English side uses diverse beam search (4 groups) and one candidate different "
            "from the input is drawn at random (NL-Augmenter's 'random' selection; DiPS is not reimplemented)")
    defaults = {"forward": "Helsinki-NLP/opus-mt-en-de", "backward": "Helsinki-NLP/opus-mt-de-en", "candidates": 4}

    def apply(self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None) -> list[str]:
        k = self.params["candidates"]
        german = [c[0] for c in self.generate(self.params["forward"], list(batch), num_beams=4)]
        cands = self.generate(self.params["backward"], german, num_beams=k, num_beam_groups=k,
                              diversity_penalty=1.0, num_return_sequences=k)
        out = []
        for text, options in zip(batch, cands):
            options = [o for o in options if o.strip() and o != text] or [text]
            out.append(clean_output(text, rng_for(seed, self.name, text).choice(options)))
        return out


@register
class Casual2Formal(_Seq2Seq):
    """Styleformer's casual-to-formal T5 model."""

    name = "Casual2Formal"
    meaning = Meaning.PRESERVING.value
    needs = ("model:prithivida/informal_to_formal_styletransfer",)
    source = "NL-Augmenter Casual2Formal via Styleformer (AugCSE App. A.2)"
    rule = "T5 style transfer with the prefix 'transfer Casual to Formal: ', beam search"
    prefix = "transfer Casual to Formal: "
    defaults = {"model": "prithivida/informal_to_formal_styletransfer"}

    def apply(self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None) -> list[str]:
        outs = self.generate(self.params["model"], list(batch), num_beams=4)
        return [clean_output(t, o[0]) for t, o in zip(batch, outs)]
