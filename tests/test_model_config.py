"""``model.config``: the backbone's config values a recipe replaces before the weights load (a paper's
dropout), on every pooler; a key the config does not have is refused by name."""

from __future__ import annotations

import pytest

from augcse.core.schema import RecipeError
from augcse.training.recipes.config import validate_recipe
from augcse.training.build import build_model


def _dropouts(model) -> set[float]:
    return {module.p for module in model[0].auto_model.modules() if type(module).__name__ == "Dropout"}


@pytest.mark.parametrize("pooler", ["cls", "avg_top2", "prompt", None])
def test_the_encoder_trains_with_the_recipes_dropout(tiny_model_dir, pooler):
    recipe = validate_recipe({"model": {"backbone": str(tiny_model_dir), "pooler": pooler,
                                        "config": {"hidden_dropout_prob": 0.15, "attention_probs_dropout_prob": 0.2}}})
    model = build_model(recipe)
    assert _dropouts(model) == {0.15, 0.2}
    assert model[0].auto_model.config.hidden_dropout_prob == 0.15
    plain = build_model(validate_recipe({"model": {"backbone": str(tiny_model_dir), "pooler": pooler}}))
    assert _dropouts(plain) == {0.1}  # without the key: the checkpoint's own


def test_an_unknown_config_key_is_refused_by_name(tiny_model_dir):
    recipe = validate_recipe({"model": {"backbone": str(tiny_model_dir), "config": {"dropout": 0.1}}})
    with pytest.raises(RecipeError, match=r"^recipe key 'model.config.dropout': the backbone's config has no dropout "
                                          r"\(its dropout keys: attention_probs_dropout_prob, classifier_dropout, "
                                          r"hidden_dropout_prob\)$"):
        build_model(recipe)


def test_augcse_train_refuses_it_in_one_line_before_the_corpus_is_read(tiny_model_dir, data_dir, tmp_path, capsys,
                                                                        caplog):
    import logging

    from augcse.commands.main import main

    caplog.set_level(logging.INFO)
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:40]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    code = main(["train", "--recipe", "simcse-minilm", f"model.backbone={tiny_model_dir}",
                 f"data.corpus={tmp_path / 'corpus.txt'}", "model.config.hidden_dropout=0.2",
                 f"output_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].endswith("recipe key 'model.config.hidden_dropout': the backbone's config has no "
                                          "hidden_dropout (its dropout keys: attention_probs_dropout_prob, "
                                          "classifier_dropout, hidden_dropout_prob)")
    assert "read 40 lines" not in caplog.text and not (tmp_path / "runs" / "simcse-minilm").exists()
