"""Weight interpolation between a starting and an adapted model (WiSE-FT, Wortsman et al. 2022).

``(1 - α)·start + α·adapted`` for every floating-point tensor; α = 0 is the starting model, α = 1 the adapted
one. Integer buffers (e.g. position ids) are taken from the adapted model unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


def interpolate(start: Mapping[str, torch.Tensor], adapted: Mapping[str, torch.Tensor],
                alpha: float) -> dict[str, torch.Tensor]:
    """The state dict ``(1 - alpha)·start + alpha·adapted``; both must hold the same keys and shapes."""
    if set(start) != set(adapted):
        raise ValueError("interpolate needs two state dicts of the same model (their keys differ)")
    return {key: torch.lerp(start[key], value, alpha) if value.is_floating_point() else value
            for key, value in adapted.items()}
