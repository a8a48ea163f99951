"""A sentence-transformers backbone rebuilt with a named pooler keeps its modules after pooling (``Normalize``)
unless the recipe says ``model.normalize: false``; a plain encoder gets nothing added."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

SENTENCES = ["A man is playing a guitar.", "Stocks fell sharply on Monday.", "The cat sleeps."]


@pytest.fixture(scope="module")
def tiny_st_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT saved as a sentence-transformers model published like all-MiniLM-L6-v2: mean + Normalize."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean"),
                                         Normalize()])
    out = tmp_path_factory.mktemp("tiny-st")
    model.save(str(out))
    return out


def kinds(model) -> list[str]:
    return [type(module).__name__ for module in model]


def test_rebuild_keeps_normalize_unless_told(tiny_st_dir: Path, tiny_model_dir: Path, caplog) -> None:
    from augcse.models.poolers import build_sentence_transformer

    kept = build_sentence_transformer(str(tiny_st_dir), "avg", max_seq_length=None)
    assert kinds(kept) == ["Transformer", "Pooling", "Normalize"]
    assert kept.max_seq_length == 64  # the published maximum
    np.testing.assert_allclose(np.linalg.norm(kept.encode(SENTENCES), axis=1), 1.0, atol=1e-5)

    with caplog.at_level(logging.INFO, logger="augcse.models.poolers"):
        bare = build_sentence_transformer(str(tiny_st_dir), "cls", max_seq_length=None, keep_after_pooling=False)
    assert kinds(bare) == ["Transformer", "Pooling"]
    assert "without its Normalize after pooling (model.normalize: false)" in caplog.text
    norms = np.linalg.norm(bare.encode(SENTENCES), axis=1)
    assert not np.allclose(norms, 1.0, atol=1e-3)

    # a plain Hugging Face encoder has nothing after pooling: nothing is added, normalize or not
    plain = build_sentence_transformer(str(tiny_model_dir), "avg", max_seq_length=None)
    assert kinds(plain) == ["Transformer", "Pooling"]


@pytest.mark.parametrize(("normalize", "expected"), [(True, ["Transformer", "Pooling", "Normalize"]),
                                                      (False, ["Transformer", "Pooling"])])
def test_quickstart_final_model_keeps_normalize(normalize: bool, expected: list[str], tiny_st_dir: Path,
                                                data_dir: Path, tmp_path: Path) -> None:
    """The quickstart recipe (pooler avg) on a backbone published with Normalize: its ``final/`` model is
    unit-norm like the backbone; ``model.normalize=false`` gives the encoder + pooler only."""
    import yaml
    from sentence_transformers import SentenceTransformer

    from augcse.training.recipes.config import load_recipe
    from augcse.training.run import run

    recipe = load_recipe(name="quickstart", overrides=[
        f"model.backbone={tiny_st_dir}", f"model.normalize={str(normalize).lower()}",
        "data.corpus=corpus/wiki1m_for_simcse.first11914.txt", "data.limit=64",
        "training.max_steps=2", "training.per_device_train_batch_size=16", "eval.dev=null", "eval.before=null",
        "eval.after=null", f"output_dir={tmp_path / 'runs'}"])
    assert recipe.model.pooler == "avg"
    run(recipe, data_dir)
    final = tmp_path / "runs" / "quickstart" / "final"
    model = SentenceTransformer(str(final))
    assert kinds(model) == expected
    norms = np.linalg.norm(model.encode(SENTENCES), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5) == normalize
    assert yaml.safe_load((final.parent / "recipe.yaml").read_text())["model"]["normalize"] is normalize
