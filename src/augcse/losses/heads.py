"""Train-only projection heads. They live in the loss, so the saved (deployable) model never has them."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn


class SimCSEMLP(nn.Module):
    """SimCSE's ``cls`` pooler MLP: Linear(d, d) + Tanh, freshly initialised (the NSP pooler is not reused)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)
        self.activation = nn.Tanh()

    def forward(self, x: Tensor) -> Tensor:
        return self.activation(self.dense(x))


class BNProjection(nn.Module):
    """DiffCSE's projection head used by AugCSE and SDA:
    Linear(d, 2d, no bias) → BN(2d) → ReLU → Linear(2d, d, no bias) → BN(d, affine=False).

    Batch statistics make the loss depend on batch composition, so callers apply it once over the
    concatenation of all views (as AugCSE's code does).
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, 2 * dim, bias=False),
            nn.BatchNorm1d(2 * dim),
            nn.ReLU(inplace=True),
            nn.Linear(2 * dim, dim, bias=False),
            nn.BatchNorm1d(dim, affine=False),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class VaSCLHead(nn.Module):
    """VaSCL's contrastive head: Linear(d, d, no bias) → ReLU → Linear(d, 128, no bias).

    SCCL's head is the same with biases (``bias=True``; amazon-science/sccl models/Transformers.py).
    """

    def __init__(self, dim: int, out_dim: int = 128, bias: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim, bias=bias), nn.ReLU(), nn.Linear(dim, out_dim, bias=bias))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


HEADS: dict[str, Callable[[int], nn.Module]] = {
    "none": lambda dim: nn.Identity(),
    "mlp": SimCSEMLP,
    "bn": BNProjection,
    "vascl": VaSCLHead,
    "sccl": lambda dim: VaSCLHead(dim, bias=True),
}


def build_head(name: str | None, dim: int) -> nn.Module:
    """A head by registry name (``none``, ``mlp``, ``bn``, ``vascl``, ``sccl``; the loss parameters' ``HeadName``)."""
    return HEADS[name or "none"](dim)
