"""Gradient caching: the exact gradient of a large in-batch-negative loss with one mini-batch of activations alive.

Every augcse contrastive loss is a function of the pooled embeddings of its columns (:meth:`RoleLoss.compute_loss`),
so the loss of a batch of 1024 needs all 1024 embeddings but not all their activations at once. With
``mini_batch_size`` set, a loss (1) embeds each source (a column, or ``~column``: another dropout pass of it)
mini-batch by mini-batch without a graph, keeping each mini-batch's RNG state; (2) computes the loss on the
whole batch from those embeddings and its gradient with respect to them and to the loss's own parameters (the
train-only heads, AugCSE's discriminator); (3) in the backward pass, re-embeds each mini-batch with its dropout
replayed and back-propagates the cached gradient into the encoder, scaled by whatever the outer backward
passes (mixed-precision scaling, gradient accumulation). The machinery of steps (1) and (3) is
sentence-transformers' own (:mod:`sentence_transformers.base.losses.gradcache`, GradCache of Gao et al. 2021);
this module only connects it to losses that return named components and own parameters.

The encoder's parameter gradients equal the uncached loss's when the mini-batches see the same dropout
masks (``tests/test_gradcache.py``, every loss, float64); the forward pass costs one extra encoder forward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import Tensor, nn

from sentence_transformers.base.losses.gradcache import (
    CachedLossMixin, RandContext, _backward_hook, _minibatch_ranges,
)

Compute = Callable[[dict[str, Tensor]], dict[str, Tensor]]


def autocast_state(device_type: str) -> tuple[bool, torch.dtype]:
    """Whether autocast is on for ``device_type`` and its dtype, so the replay runs as the first pass ran."""
    return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)


class _Embedder(CachedLossMixin):
    """sentence-transformers' mini-batch embedder (and the replay its backward hook drives) for one model."""

    def __init__(self, model: nn.Module, mini_batch_size: int) -> None:
        self.model = model
        self.mini_batch_size = mini_batch_size


def own_parameters(loss: nn.Module, model: nn.Module) -> list[nn.Parameter]:
    """The trainable parameters of ``loss`` that are not the encoder's (heads, discriminators)."""
    encoder = {id(p) for p in getattr(model, "module", model).parameters()}
    return [p for p in loss.parameters() if p.requires_grad and id(p) not in encoder]


def cached_components(loss: nn.Module, model: nn.Module, features: Mapping[str, dict[str, Tensor]],
                      compute: Compute, mini_batch_size: int) -> dict[str, Tensor]:
    """``compute`` (pooled embeddings by source → named loss components) with gradient caching.

    The components are returned as values; their sum carries the backward pass (steps 2–3 above), so a
    trainer that sums them and calls ``backward`` trains exactly as with the uncached loss.
    """
    embedder = _Embedder(model, mini_batch_size)
    device_type = next(iter(next(iter(features.values())).values())).device.type
    # the backward pass runs outside the caller's autocast (as a trainer's does): replay under the same one
    enabled, dtype = autocast_state(device_type)
    columns = list(features.values())
    ranges = [_minibatch_ranges(column, mini_batch_size) for column in columns]
    reps: list[list[Tensor]] = []
    states: list[list[RandContext | None]] = []
    for column, column_ranges in zip(columns, ranges):
        pairs = list(embedder.embed_minibatch_iter(column, with_grad=False, copy_random_state=True,
                                                   ranges=column_ranges))
        reps.append([rep.detach().requires_grad_() for rep, _ in pairs])
        states.append([state for _, state in pairs])
    pooled = {source: torch.cat(column_reps) for source, column_reps in zip(features, reps)}
    parts = compute(pooled)
    total = torch.stack(list(parts.values())).sum()
    leaves = [rep for column_reps in reps for rep in column_reps]
    own = own_parameters(loss, model)
    grads = torch.autograd.grad(total, [*leaves, *own], allow_unused=True)
    cache: list[list[Tensor]] = []
    unused = []
    position = 0
    for source, column_reps in zip(features, reps):
        column_grads = list(grads[position:position + len(column_reps)])
        position += len(column_reps)
        if any(grad is None for grad in column_grads):
            unused.append(source)
        cache.append(column_grads)
    if unused:
        raise ValueError(f"{type(loss).__name__} did not read the embeddings of {unused}: drop those columns")
    own_grads = list(zip(own, grads[len(leaves):]))

    def backward(grad_output: Tensor) -> None:
        with torch.autocast(device_type, dtype=dtype, enabled=enabled):
            _backward_hook(grad_output, sentence_features=columns, loss_obj=embedder, cache=cache,
                           random_states=states, ranges=ranges)
        for parameter, grad in own_grads:
            if grad is not None:
                scaled = grad * grad_output
                parameter.grad = scaled if parameter.grad is None else parameter.grad + scaled

    carrier = total.detach().requires_grad_()
    carrier.register_hook(backward)
    names = list(parts)
    out = {name: parts[name].detach() for name in names}
    # the first component carries the backward pass; the sum of all equals the loss, its gradient is 1
    out[names[0]] = carrier - (total.detach() - out[names[0]])
    return out
