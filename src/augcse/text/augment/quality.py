"""AugCSE §6.1 quality signals: how far an augmentation moves a sentence.

* :func:`similarity` - cosine between the original and the augmented sentence under a reference
  sentence-transformers encoder (the paper uses all-mpnet-base-v2; any encoder works).
* :func:`pseudo_log_likelihood` - masked-LM pseudo-log-likelihood (Salazar et al. 2020): mask each
  token in turn and sum the log-probability of the true token. Works with any Hugging Face masked LM.
* :func:`causal_log_likelihood` - per-sentence log-likelihood under a causal LM (the paper's GPT-2
  perplexity difference), when one is available.
* :func:`quality_table` - per augmentation: mean similarity and mean LM-score difference.
"""

from __future__ import annotations

from typing import Any, Sequence

from augcse.assets.resolve import resolve_model


def similarity(originals: Sequence[str], augmented: Sequence[str], encoder: Any, batch_size: int = 64) -> list[float]:
    """Cosine similarity of each (original, augmented) pair; ``encoder`` is a SentenceTransformer or a name."""
    import torch

    if isinstance(encoder, str):
        from sentence_transformers import SentenceTransformer

        encoder = SentenceTransformer(resolve_model(encoder))
    a = encoder.encode(list(originals), batch_size=batch_size, convert_to_tensor=True)
    b = encoder.encode(list(augmented), batch_size=batch_size, convert_to_tensor=True)
    return torch.nn.functional.cosine_similarity(a, b, dim=1).tolist()


def _load(kind: str, model_name_or_path: str) -> tuple[Any, Any]:
    import transformers

    path = resolve_model(model_name_or_path)
    model = getattr(transformers, kind).from_pretrained(path)
    model.eval()
    return transformers.AutoTokenizer.from_pretrained(path), model


def pseudo_log_likelihood(sentences: Sequence[str], model_name_or_path: str, batch_size: int = 64,
                          max_length: int = 64, model: tuple[Any, Any] | None = None) -> list[float]:
    """Masked-LM pseudo-log-likelihood of each sentence (higher = more natural to the LM)."""
    import torch

    tok, mlm = model or _load("AutoModelForMaskedLM", model_name_or_path)
    scores = []
    for sentence in sentences:
        ids = tok(sentence, truncation=True, max_length=max_length, return_tensors="pt")["input_ids"][0]
        positions = [i for i, t in enumerate(ids.tolist()) if t not in tok.all_special_ids]
        if not positions:
            scores.append(0.0)
            continue
        total = 0.0
        for start in range(0, len(positions), batch_size):
            chunk = positions[start:start + batch_size]
            batch = ids.repeat(len(chunk), 1)
            batch[torch.arange(len(chunk)), chunk] = tok.mask_token_id
            with torch.no_grad():
                logits = mlm(input_ids=batch).logits
            logp = logits[torch.arange(len(chunk)), chunk].log_softmax(-1)
            total += logp[torch.arange(len(chunk)), ids[chunk]].sum().item()
        scores.append(total)
    return scores


def causal_log_likelihood(sentences: Sequence[str], model_name_or_path: str, max_length: int = 128,
                          model: tuple[Any, Any] | None = None, **load_kwargs: Any) -> list[float]:
    """Summed token log-likelihood under a causal LM (``exp(-ll / n)`` is the perplexity)."""
    import torch

    if model is None:
        import transformers

        path = resolve_model(model_name_or_path)
        lm = transformers.AutoModelForCausalLM.from_pretrained(path, **load_kwargs).eval()
        tok = transformers.AutoTokenizer.from_pretrained(path, **load_kwargs)
    else:
        tok, lm = model
    scores = []
    for sentence in sentences:
        ids = tok(sentence, truncation=True, max_length=max_length, return_tensors="pt")["input_ids"]
        if tok.bos_token_id is not None and (ids.shape[1] == 0 or ids[0, 0] != tok.bos_token_id):
            ids = torch.cat([torch.tensor([[tok.bos_token_id]]), ids], dim=1)
        if ids.shape[1] < 2:
            scores.append(0.0)
            continue
        with torch.no_grad():
            logits = lm(input_ids=ids).logits[0, :-1]
        scores.append(logits.log_softmax(-1).gather(1, ids[0, 1:, None]).sum().item())
    return scores


def quality_table(originals: Sequence[str], augmented: dict[str, Sequence[str]], encoder: Any,
                  lm: str | None = None, changed_only: bool = True) -> list[dict[str, Any]]:
    """Per augmentation: mean cosine similarity and mean LM-score difference (augmented - original).

    ``lm`` is a masked LM name or folder (pseudo-log-likelihood). Only changed sentences are scored
    when ``changed_only`` (an unchanged sentence has similarity 1 and difference 0 by definition).
    """
    model = _load("AutoModelForMaskedLM", lm) if lm else None
    base_cache: dict[str, float] = {}
    rows = []
    for name, outs in augmented.items():
        pairs = [(o, a) for o, a in zip(originals, outs) if a != o or not changed_only]
        row: dict[str, Any] = {"augmentation": name, "pairs": len(pairs)}
        if pairs:
            sims = similarity([p[0] for p in pairs], [p[1] for p in pairs], encoder)
            row["similarity"] = sum(sims) / len(sims)
            if model is not None:
                todo = [o for o, _ in pairs if o not in base_cache]
                base_cache.update(zip(todo, pseudo_log_likelihood(todo, lm, model=model)))
                aug = pseudo_log_likelihood([a for _, a in pairs], lm, model=model)
                row["pll_diff"] = sum(x - base_cache[o] for x, (o, _) in zip(aug, pairs)) / len(pairs)
        rows.append(row)
    return rows


def format_quality(rows: list[dict[str, Any]]) -> str:
    lines = ["| augmentation | pairs | mean similarity | mean PLL difference |", "|---|---:|---:|---:|"]
    for r in rows:
        sim = f"{r['similarity']:.3f}" if "similarity" in r else "-"
        pll = f"{r['pll_diff']:.2f}" if "pll_diff" in r else "-"
        lines.append(f"| {r['augmentation']} | {r['pairs']} | {sim} | {pll} |")
    return "\n".join(lines)
