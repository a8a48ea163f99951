"""A Hugging Face encoder exported to ONNX, and the module that runs such an export in its place.

The export is traced once per model (dynamic batch and length) in float32 with eager attention,
the pattern ONNX Runtime's transformer fusion recognises; :class:`RuntimeEncoder` then answers the
sentence-transformers ``Transformer`` module exactly as the PyTorch model did.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutput

OPSET = 17


class _Outputs(torch.nn.Module):
    """The encoder as a function of positional tensors returning its last (or every) hidden state: what is traced."""

    def __init__(self, encoder: torch.nn.Module, names: tuple[str, ...], all_layers: bool) -> None:
        super().__init__()
        self.encoder, self.names, self.all_layers = encoder, names, all_layers

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.encoder(**dict(zip(self.names, inputs)), output_hidden_states=self.all_layers, return_dict=True)
        return tuple(out.hidden_states) if self.all_layers else (out.last_hidden_state,)


def _all_layers(encoder: torch.nn.Module) -> bool:
    """Whether the model's poolers read every layer (augcse's first-last and top-2 poolers do)."""
    return bool(getattr(encoder.config, "output_hidden_states", False))


def export_dir(root: Path, encoder: torch.nn.Module) -> Path:
    """``root/<fingerprint>-<all|last>``: one folder per model weights and per set of exported layers."""
    from augcse.evaluation.encoding import model_fingerprint

    return root / f"{model_fingerprint(encoder)}-{'all' if _all_layers(encoder) else 'last'}"


def export_onnx(encoder: torch.nn.Module, names: tuple[str, ...], out: Path) -> Path:
    """``out/model.onnx``: ``encoder`` taking ``names`` (int64, batch × tokens); reused when already there."""
    path = out / "model.onnx"
    if path.is_file():
        return path
    out.mkdir(parents=True, exist_ok=True)
    all_layers = _all_layers(encoder)
    outputs = ([f"hidden_state_{i}" for i in range(encoder.config.num_hidden_layers + 1)] if all_layers
               else ["last_hidden_state"])
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])  # a padded row, so the trace keeps the mask's path
    example = tuple({"attention_mask": mask, "token_type_ids": torch.zeros_like(mask)}.get(n, mask) for n in names)
    before = encoder.config._attn_implementation
    encoder.set_attn_implementation("eager")
    tmp = out / f"model.{os.getpid()}.tmp.onnx"  # two runs exporting at once each write their own
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on constant shapes and on the legacy exporter
            torch.onnx.export(_Outputs(encoder, names, all_layers).eval(), example, str(tmp), input_names=list(names),
                              output_names=outputs, opset_version=OPSET, dynamo=False,
                              dynamic_axes={n: {0: "batch", 1: "tokens"} for n in (*names, *outputs)})
    finally:
        encoder.set_attn_implementation(before)
    tmp.replace(path)
    return path


class RuntimeEncoder(torch.nn.Module):
    """Stands in for a Hugging Face encoder inside a sentence-transformers ``Transformer`` module.

    ``forward(input_ids=…, attention_mask=…, …)`` returns what the replaced model returned (a
    ``BaseModelOutput`` with ``last_hidden_state`` and, when the config asks, ``hidden_states``),
    computed by ``runner``. The PyTorch model stays attached (``torch_encoder``) so the model's
    config, weights, device and fingerprint are still those of the model that was loaded.
    """

    def __init__(self, torch_encoder: torch.nn.Module,
                 runner: Callable[[Mapping[str, np.ndarray]], list[np.ndarray]],
                 names: tuple[str, ...], backend: str) -> None:
        super().__init__()
        self.torch_encoder = torch_encoder
        self.config = torch_encoder.config
        self.runner, self.names, self.backend = runner, names, backend

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs) -> BaseModelOutput:
        given = {"input_ids": input_ids, "attention_mask": attention_mask, **kwargs}
        if given.get("token_type_ids") is None:
            given["token_type_ids"] = torch.zeros_like(input_ids)
        outs = [torch.from_numpy(np.asarray(o)) for o in self.runner({n: given[n].cpu().numpy().astype(np.int64)
                                                                     for n in self.names})]
        if len(outs) > 1:
            return BaseModelOutput(last_hidden_state=outs[-1], hidden_states=tuple(outs))
        return BaseModelOutput(last_hidden_state=outs[0])

    def extra_repr(self) -> str:
        return f"backend={self.backend}"
