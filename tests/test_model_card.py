"""The model card: base model, corpus actually used, loss and citation, every score in model-index, widgets."""

from __future__ import annotations

from pathlib import Path

import yaml

from augcse.losses import LOSSES
from augcse.training.model_card import widget_examples, write_model_card
from augcse.training.recipes.config import load_recipe

SCORES = {"before": {"STS12": 60.0, "STSBenchmark": 70.0, "sts_avg": 65.0},
          "after": {"STS12": 66.25, "STSBenchmark": 74.5, "sts_avg": 70.375}}
SUMMARY = {"name": "quickstart", "corpus": "/data/corpus/wiki1m_for_simcse.first11914.txt",
           "corpus_stats": {"read": 11914, "kept": 4096, "skipped": {"over_limit": 7818}},
           "train_rows": 4096, "global_step": 64, "best_metric": 0.8123, "best_step": 48, "seconds": 612.0}


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text[4:].partition("\n---\n")[0])


def test_card_names_base_model_corpus_loss_scores_and_widgets(tiny_st, tmp_path: Path) -> None:
    recipe = load_recipe(None, "quickstart", [])
    loss = LOSSES["simcse"](tiny_st, temperature=0.05)
    final = tmp_path / "final"
    tiny_st.save(str(final))
    write_model_card(final, recipe, SCORES, SUMMARY, loss)
    text = (final / "README.md").read_text()
    meta = front_matter(text)

    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert "[Unknown]" not in text and "wiki1m_for_simcse.first11914.txt" in text
    assert "read 11,914, kept 4,096" in text and "over limit 7,818" in text
    assert "step 48" in text and "10.2 min" in text
    assert "@inproceedings" in text and "temperature" in text  # loss citation and parameters
    results = {r["dataset"]["name"]: r for r in meta["model-index"][0]["results"]}
    assert set(results) == {"STS12", "STSBenchmark"}  # every task, no suite average as a dataset
    sts12 = results["STS12"]
    assert sts12["task"]["type"] == "semantic-similarity"
    assert sts12["metrics"][0]["type"] == "spearman_cosine" and sts12["metrics"][0]["value"] == 0.6625
    widgets = meta["widget"]
    assert len(widgets) == 3 and all(len(w["source_sentence"].split()) >= 6 for w in widgets)
    assert "| STSBenchmark | 70.00 | 74.50 | +4.50 |" in text


def test_widget_examples_come_from_stsb_dev() -> None:
    examples = widget_examples()
    assert examples[0]["source_sentence"] and len(examples[0]["sentences"]) == 2
    junk = {".", "In:", "</score>"}
    assert not junk & {s for e in examples for s in [e["source_sentence"], *e["sentences"]]}
