"""The encoder on ONNX Runtime and OpenVINO gives PyTorch float32's embeddings; exports are cached per model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from augcse.commands.main import main
from augcse.evaluation import backends, encoding
from augcse.evaluation.backends import check_backend, use_backend

SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument on a stage tonight, loudly.", "Hi.",
             "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm windowsill."]


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
@pytest.mark.parametrize("pooler", ["avg", "avg_first_last"])  # last layer only / every layer exported
def test_backend_embeddings_equal_torch_float32(backend, pooler, tiny_model_dir, tmp_path) -> None:
    from augcse.models.poolers import build_sentence_transformer

    model = build_sentence_transformer(str(tiny_model_dir), pooler, 32).eval()
    expected = model.encode(SENTENCES, batch_size=3)  # batches of different lengths, padded rows
    use_backend(model, backend, cache_root=tmp_path)
    assert type(model[0].auto_model).__name__ == "RuntimeEncoder"
    got = model.encode(SENTENCES, batch_size=3)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert 1 - _min_cosine(got, expected) < 1e-5
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_export_is_cached_per_model(tiny_model_dir, tmp_path, monkeypatch) -> None:
    from augcse.evaluation import onnx_encoder
    from augcse.models.poolers import build_sentence_transformer

    use_backend(build_sentence_transformer(str(tiny_model_dir), "avg", 32), "onnx", cache_root=tmp_path)
    (folder,) = tmp_path.iterdir()
    assert (folder / "model.onnx").is_file() and (folder / "model.ort.onnx").is_file()
    exported = (folder / "model.onnx").stat().st_mtime_ns

    traced = []
    monkeypatch.setattr(onnx_encoder.torch.onnx, "export", lambda *a, **k: traced.append(a))
    model = build_sentence_transformer(str(tiny_model_dir), "avg", 32)
    use_backend(model, "openvino", cache_root=tmp_path)  # same weights: the same export, not traced again
    assert traced == [] and (folder / "model.onnx").stat().st_mtime_ns == exported
    encoder = model[0].auto_model.torch_encoder
    with torch.no_grad():
        encoder.embeddings.word_embeddings.weight.add_(1.0)
    assert onnx_encoder.export_dir(tmp_path, encoder) != folder  # other weights, another export


def test_backend_refuses_a_model_already_converted(tiny_st, tmp_path) -> None:
    use_backend(tiny_st, "onnx", cache_root=tmp_path)
    with pytest.raises(ValueError, match="already runs on the onnx backend"):
        use_backend(tiny_st, "openvino", cache_root=tmp_path)


def test_torch_backend_leaves_the_model_alone(tiny_st) -> None:
    encoder = tiny_st[0].auto_model
    assert use_backend(tiny_st, "torch") is tiny_st and tiny_st[0].auto_model is encoder


def test_unknown_or_missing_backend_is_one_clear_error(monkeypatch) -> None:
    with pytest.raises(ValueError, match=r"unknown backend 'onx' \(did you mean 'onnx'\?\); choose one of torch"):
        check_backend("onx")
    real = importlib.util.find_spec
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda n: None if n == "openvino" else real(n))
    with pytest.raises(ValueError, match=r"--backend openvino needs openvino: pip install 'augcse\[openvino\]'"):
        check_backend("openvino")


@pytest.mark.parametrize("args, message", [
    (["--backend", "onx"], "unknown backend 'onx'"),
    (["--backend", "onnx", "--bf16"], "--bf16 autocasts PyTorch and --backend onnx runs float32"),
])
def test_eval_cli_refuses_before_loading(args, message, capsys, monkeypatch) -> None:
    import augcse.models.load

    monkeypatch.setattr(augcse.models.load, "load_model", lambda *a, **k: pytest.fail("loaded a model"))
    assert main(["eval", "no-such-model", "--tasks", "STSBenchmark-dev-original", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_bf16_warning_follows_a_measurement_not_the_cpu_flags(monkeypatch) -> None:
    """The warning comes from timing bf16 against float32 here; the flags no longer decide (a CPU with
    AVX512-BF16 whose kernels do not use it is warned, one without the flag that is faster is not)."""
    cpu = torch.device("cpu")
    monkeypatch.setattr(encoding, "cpu_flags", lambda: {"avx2", "avx512_bf16"})
    monkeypatch.setattr(encoding, "bf16_probe", lambda: encoding.Bf16Probe(float32_ms=10.0, bf16_ms=25.0))
    line = encoding.bf16_warning(cpu, "training.bf16")
    assert line == ("warning: training.bf16 is slower than float32 on this CPU (a feed-forward product measured "
                    "25.0 ms in bf16, 10.0 ms in float32); drop training.bf16")
    assert encoding.bf16_warning(torch.device("cuda")) is None
    monkeypatch.setattr(encoding, "cpu_flags", lambda: {"avx2", "fma"})
    monkeypatch.setattr(encoding, "bf16_probe", lambda: encoding.Bf16Probe(float32_ms=10.0, bf16_ms=4.0))
    assert encoding.bf16_warning(cpu) is None


def test_the_bf16_probe_measures_both_precisions_here() -> None:
    probe = encoding.bf16_probe.__wrapped__(rows=256, width=64, reps=2)  # small: the measurement, not its verdict
    assert probe.float32_ms > 0 and probe.bf16_ms > 0
    assert probe.speedup == probe.float32_ms / probe.bf16_ms


def test_cpu_flags_reads_this_machine() -> None:
    flags = encoding.cpu_flags()
    if Path("/proc/cpuinfo").is_file():
        assert flags and all(" " not in f for f in flags)


def test_encode_cli_backend_writes_torch_embeddings(tiny_model_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AUGCSE_CACHE", str(tmp_path / "cache"))
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    for backend in ("torch", "onnx"):
        assert main(["encode", str(tiny_model_dir), str(text), "--out", str(tmp_path / backend),
                     "--backend", backend]) == 0
    assert any((tmp_path / "cache" / "onnx").glob("*/model.onnx"))  # the default cache, under $AUGCSE_CACHE
    got, expected = np.load(tmp_path / "onnx.npy"), np.load(tmp_path / "torch.npy")
    assert 1 - _min_cosine(got, expected) < 1e-5


def test_eval_prints_where_the_time_went(tiny_model_dir, capsys) -> None:
    assert main(["eval", str(tiny_model_dir), "--pooler", "avg", "--tasks", "STSBenchmark-dev-original",
                 "--backend", "torch"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("(1 tasks in ") and "loading " in last and "encoding " in last and "scoring " in last
    assert "(task time: dev " in last  # STS-B dev is the "dev" suite; one in-process task: no worker processes
    assert "processes" not in last
