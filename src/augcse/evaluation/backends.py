"""Runtimes for a model's encoder during evaluation: PyTorch, ONNX Runtime or OpenVINO.

Evaluation runs the transformer forward in float32 and nothing else, which graph runtimes can do
faster than eager PyTorch on a CPU (fused attention, layer norm and GELU kernels, no Python between
ops). :func:`use_backend` swaps the model's Hugging Face encoder for such a runtime and keeps
everything around it (tokeniser, every augcse pooler, heads, ``Normalize``) in PyTorch, so
embeddings agree with PyTorch float32 to rounding. The encoder is exported to ONNX once per model
fingerprint (:mod:`augcse.evaluation.onnx_encoder`), under ``$AUGCSE_CACHE/onnx/`` (default
``~/.cache/augcse/onnx``), and both runtimes start from that file; a later run of the same model
re-exports nothing.

sentence-transformers' own ``backend="onnx"``/``"openvino"`` go through Optimum, whose current
releases pin transformers to another major version than augcse's; the runtimes themselves do not.
This module imports nothing heavy, so ``augcse eval --help`` can list the backends.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# A runner maps the encoder's inputs (int64 arrays by name) to its outputs, in export order.
Runner = Callable[[Mapping[str, Any]], list]


def _onnxruntime(onnx_path: Path, config: Any, threads: int) -> Runner:
    """ONNX Runtime on the CPU after its transformer fusions (attention, skip layer norm, GELU); cached beside the export."""
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model

    fused = onnx_path.with_name("model.ort.onnx")
    if not fused.is_file():
        optimized = optimize_model(str(onnx_path), model_type="bert", num_heads=config.num_attention_heads,
                                   hidden_size=config.hidden_size)
        tmp = fused.with_name(f"model.ort.{os.getpid()}.tmp.onnx")
        optimized.save_model_to_file(str(tmp))
        tmp.replace(fused)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(fused), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda inputs: session.run(None, {n: inputs[n] for n in names})


def _openvino(onnx_path: Path, config: Any, threads: int) -> Runner:
    """OpenVINO on the CPU at float32 inference precision (its default is bf16 on CPUs that have it)."""
    import numpy as np
    import openvino as ov

    compiled = ov.Core().compile_model(str(onnx_path), "CPU", {
        "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    names = [i.get_any_name() for i in compiled.inputs]
    return lambda inputs: [np.array(out) for out in request.infer({n: inputs[n] for n in names}).values()]


# backend name -> runner factory (None: PyTorch itself) and the packages it needs
BACKENDS: dict[str, Callable[[Path, Any, int], Runner] | None] = {
    "torch": None,
    "onnx": _onnxruntime,
    "openvino": _openvino,
}
REQUIRES: dict[str, tuple[str, ...]] = {"onnx": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx")}


def add_backend_argument(parser) -> None:
    """``--backend NAME`` on an argparse parser (``augcse eval``, ``augcse encode``)."""
    parser.add_argument("--backend", default="torch", metavar="NAME",
                        help=f"runtime of the encoder, float32: {', '.join(BACKENDS)} (ONNX Runtime, OpenVINO; "
                             "the export is cached per model under $AUGCSE_CACHE/onnx; default: torch)")


def check_backend(name: str) -> None:
    """ValueError naming the fix when ``name`` is unknown or its runtime is not installed."""
    from augcse.core.names import suggest

    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}{suggest(name, BACKENDS)}; choose one of {', '.join(BACKENDS)}")
    missing = [m for m in REQUIRES.get(name, ()) if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"--backend {name} needs {', '.join(missing)}: pip install 'augcse[{name}]', "
                         f"or use --backend torch")


def use_backend(model, name: str, threads: int | None = None, cache_root: str | Path | None = None):
    """Run ``model``'s encoder (its first module, a sentence-transformers ``Transformer``) on backend ``name``.

    Changes ``model`` in place and returns it. ``threads``: the runtime's threads (default: PyTorch's,
    i.e. all cores). ``cache_root``: where exports are kept (default ``$AUGCSE_CACHE/onnx``).

    Example::

        from augcse import load_model
        from augcse.evaluation.backends import use_backend

        model = use_backend(load_model("sentence-transformers/all-MiniLM-L6-v2"), "onnx")
        assert model.encode(["A man is playing a guitar."]).shape == (1, 384)
    """
    check_backend(name)
    factory = BACKENDS[name]
    if factory is None:
        return model
    import torch

    from augcse.assets.resolve import cache_dir
    from augcse.evaluation.onnx_encoder import RuntimeEncoder, export_dir, export_onnx

    module = model[0]
    encoder = module.auto_model
    if isinstance(encoder, RuntimeEncoder):
        raise ValueError(f"the model already runs on the {encoder.backend} backend")
    if model.device.type != "cpu":
        raise ValueError(f"--backend {name} runs on the CPU and the model is on {model.device}; use --backend torch")
    root = Path(cache_root) if cache_root is not None else cache_dir() / "onnx"
    names = tuple(n for n in ("input_ids", "attention_mask", "token_type_ids") if n in module.preprocess(["a"]))
    onnx_path = export_onnx(encoder.eval(), names, export_dir(root, encoder))
    runner = factory(onnx_path, encoder.config, threads or torch.get_num_threads())
    module.model = RuntimeEncoder(encoder, runner, names, name)
    return model
