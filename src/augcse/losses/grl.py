"""Gradient reversal (Ganin & Lempitsky, 2015) with AugCSE's α semantics (AugCSE App. A.4).

Forward is the identity; backward multiplies the incoming gradient by ``alpha``. The paper's α is the
factor actually applied, so α = −1 (the default) is the antagonistic setting: the discriminator
minimises its loss while everything below the layer receives the negated gradient and maximises it.
The authors' code calls the same thing ``gradient_reverse_multiplier = −α``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, autograd, nn


class _ScaleGradient(autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, alpha: float) -> Tensor:
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return grad * ctx.alpha, None


def scale_gradient(x: Tensor, alpha: float) -> Tensor:
    """Identity on the forward pass, ``grad · alpha`` on the backward pass."""
    return _ScaleGradient.apply(x, float(alpha))


class GradientReversal(nn.Module):
    """``scale_gradient`` as a layer; ``alpha = -1`` reverses the gradient, ``+1`` is a plain identity."""

    def __init__(self, alpha: float = -1.0) -> None:
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x: Tensor) -> Tensor:
        return scale_gradient(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"
