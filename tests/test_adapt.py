"""Domain adaptation: the adapt-* recipes train on a labelled file's texts only and evaluate end to end;
sentence-transformers' TSDAE and CT run from a recipe by name. Tiny model, tiny data, a few steps."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from augcse.training.recipes.config import RECIPE_DIR, RecipeError, load_recipe

ADAPT = sorted(p.stem for p in RECIPE_DIR.glob("adapt-*.yaml"))
CLASSES, PER_CLASS = 3, 30  # classes kept per data set; rows per class kept in the clustering sets


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows({"text": r["text"], "label": r["label"]} for r in rows)


@pytest.fixture(scope="module")
def mini_data(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The adapt recipes' files cut to three classes, so training and evaluation take seconds.

    Intent sets keep every row of those classes (the published few-shot rows must stay in the pool);
    clustering sets keep the first rows of each class.
    """
    out = tmp_path_factory.mktemp("mini-data")
    for folder in sorted((data_dir / "intent").iterdir()):
        keep = sorted({r["label"] for r in _rows(folder / "train.csv")})[:CLASSES]
        for file in folder.glob("*.csv"):
            if not file.name.startswith("oos_"):
                _write(out / "intent" / folder.name / file.name, [r for r in _rows(file) if r["label"] in keep])
    for file in (data_dir / "clustering").glob("*.csv"):
        rows = _rows(file)
        keep = sorted({r["label"] for r in rows})[:CLASSES]
        _write(out / "clustering" / file.name,
               [r for label in keep for r in [r for r in rows if r["label"] == label][:PER_CLASS]])
    return out


@pytest.fixture()
def quick_intent(monkeypatch: pytest.MonkeyPatch) -> None:
    """VaSCL's few-shot classifier with 20 steps instead of 1000 (the protocol is tested in test_intent.py)."""
    from augcse.evaluation import intent

    monkeypatch.setattr(intent, "VASCL_STEPS", 20)
    monkeypatch.setattr(intent, "VASCL_EVERY", 10)


@pytest.fixture()
def training_sets(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every dataset handed to the trainer (captured where the loss is bound to it)."""
    import augcse.losses

    seen: list = []
    bind = augcse.losses.bind_dataset

    def spy(loss, dataset) -> None:
        seen.append(dataset)
        bind(loss, dataset)

    monkeypatch.setattr(augcse.losses, "bind_dataset", spy)
    return seen


def tiny(name: str, tiny_model_dir: Path, runs: Path, *overrides: str):
    return load_recipe(name=name, overrides=[
        f"output_dir={runs}", f"model.backbone={tiny_model_dir}", "name=t", "data.limit=16",
        "training.per_device_train_batch_size=4", "training.max_steps=3", "training.logging_steps=1",
        "eval.before=null", *overrides])


def test_every_domain_has_an_adapt_recipe():
    assert {"adapt-banking77", "adapt-clinc150", "adapt-hwu64", "adapt-stackoverflow", "adapt-biomedical",
            "adapt-tweet", "adapt-searchsnippets"} <= set(ADAPT)
    for name in ADAPT:
        recipe = load_recipe(name=name)
        assert recipe.eval.dev is None and recipe.data.column == "text"  # no model selection on a test split


@pytest.mark.parametrize("name", ADAPT)
def test_adapt_recipe_trains_on_texts_only_and_evaluates(name, tiny_model_dir, mini_data, tmp_path, quick_intent,
                                                          training_sets):
    from augcse.training.run import run

    recipe = tiny(name, tiny_model_dir, tmp_path)
    run(recipe, mini_data)
    task = recipe.eval.after
    scores = json.loads((tmp_path / "t" / "eval.json").read_text())["after"]
    assert 0 <= scores[task] <= 100
    (dataset,) = training_sets
    assert dataset.column_names == ["anchor"]
    file_rows = _rows(mini_data / recipe.data.corpus)
    assert set(dataset["anchor"]) <= {r["text"].strip() for r in file_rows}
    assert not set(dataset["anchor"]) & {r["label"] for r in file_rows}


def test_labels_do_not_change_the_trained_model(tiny_model_dir, mini_data, tmp_path):
    """The same texts with other labels give the same model, weight for weight."""
    from sentence_transformers import SentenceTransformer

    from augcse.training.run import run

    rows = _rows(mini_data / "intent" / "hwu64" / "train.csv")
    relabelled = tmp_path / "relabelled.csv"
    _write(relabelled, [{"text": r["text"], "label": f"other-{i % 7}"} for i, r in enumerate(rows)])
    finals = []
    for corpus, runs in ((mini_data / "intent/hwu64/train.csv", tmp_path / "a"), (relabelled, tmp_path / "b")):
        run(tiny("adapt-hwu64", tiny_model_dir, runs, f"data.corpus={corpus}", "eval.after=null"), mini_data)
        finals.append(SentenceTransformer(str(runs / "t" / "final")).state_dict())
    start = SentenceTransformer(str(tiny_model_dir)).state_dict()
    assert any(not torch.equal(start[k], finals[0][k]) for k in start if k in finals[0])  # it did train
    assert all(torch.equal(finals[0][k], finals[1][k]) for k in finals[0])


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet", ".txt"])
def test_a_users_text_column_is_read_alone(tmp_path, suffix):
    from datasets import Dataset

    from augcse.text.corpus import read_corpus

    texts = ["my card was declined", "how do I reset my PIN", "transfer failed again"]
    table = Dataset.from_dict({"id": [1, 2, 3], "body": texts, "label": ["card", "pin", "transfer"]})
    path = tmp_path / f"tickets{suffix}"
    {".csv": table.to_csv, ".jsonl": table.to_json, ".parquet": table.to_parquet,
     ".txt": lambda p: Path(p).write_text("\n".join(texts) + "\n")}[suffix](str(path))
    assert read_corpus(path, column="body")[0] == texts


PEERS = {"tsdae": ["loss.name=tsdae", "data.views=[{name: tsdae_noise}]"], "ct": ["loss.name=ct"]}


@pytest.mark.parametrize("loss", sorted(PEERS))
def test_sentence_transformers_peers_train_from_a_recipe_by_name(loss, tiny_model_dir, mini_data, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses as st_losses

    from augcse.training.build import build_loss, build_model
    from augcse.training.run import run

    recipe = tiny("adapt-tweet", tiny_model_dir, tmp_path, *PEERS[loss], "eval.after=null")
    peer = build_loss(recipe, build_model(recipe)).peer
    assert type(peer) is {"tsdae": st_losses.DenoisingAutoEncoderLoss,
                          "ct": st_losses.ContrastiveTensionLossInBatchNegatives}[loss]  # the library's class
    run(recipe, mini_data)
    logged = [json.loads(line) for line in (tmp_path / "t" / "log.jsonl").read_text().splitlines()]
    values = [r[loss] for r in logged if loss in r]
    assert len(values) == 3 and all(v > 0 for v in values)
    start = SentenceTransformer(str(tiny_model_dir)).state_dict()
    final = SentenceTransformer(str(tmp_path / "t" / "final")).state_dict()
    assert set(final) == set(start)  # a plain encoder: no decoder or second copy saved with it
    assert any(not torch.equal(start[k], final[k]) for k in start)


def test_tsdae_noise_deletes_words_reproducibly():
    from datasets import Dataset

    from augcse.text.views import ViewContext, build_views

    text = ["the quick brown fox jumps over the lazy dog near the river bank today"] * 8
    build = lambda seed: build_views(Dataset.from_dict({"text": text}), [{"name": "tsdae_noise"}],  # noqa: E731
                                     ViewContext(model=None, seed=seed))
    one, again, other = build(1), build(1), build(2)
    assert one["noisy"] == again["noisy"] and one["noisy"] != other["noisy"]
    for noisy in one["noisy"]:
        words = noisy.split()
        assert 1 <= len(words) < len(text[0].split()) and set(words) <= set(text[0].split())


@pytest.mark.parametrize("overrides, message", [
    (["loss.name=tsdae"], "reads the role 'noisy' but the dataset has no such column"),
    (["loss.name=tsdae", "data.views=[{name: tsdae_noise, del_ratio: 1.5}]"], "recipe key 'data.views[0].del_ratio' must be < 1, got 1.5"),
    (["loss.name=ct", "loss.params={scale: big}"], "recipe key 'loss.params.scale' must be a number, got 'big'"),
    (["loss.name=ct", "loss.params={similarity_fct: dot}"], "unknown recipe key 'loss.params.similarity_fct'"),
    (["loss.name=tsdae", "data.views=[{name: tsdae_noise}]", "loss.params={tie_encoder_decoder: 1}"],
     "recipe key 'loss.params.tie_encoder_decoder' must be true or false, got 1"),
    (["loss.name=tsdea"], "did you mean 'tsdae'"),
])
def test_bad_peer_settings_are_refused_at_load(overrides, message):
    with pytest.raises(RecipeError) as error:
        load_recipe(name="adapt-tweet", overrides=overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_wrong_text_column_is_named(tmp_path):
    from augcse.text.corpus import read_corpus

    path = tmp_path / "tickets.jsonl"
    path.write_text('{"body": "my card was declined", "label": "card"}\n{"body": "reset my PIN", "label": "pin"}\n')
    with pytest.raises(ValueError, match="no row has a text under 'text': set data.column"):
        read_corpus(path)


def test_a_users_labelled_sample_is_a_clustering_task(tmp_path, tiny_st):
    from augcse.evaluation.suite import run_tasks, selection_metrics
    from augcse.evaluation.tasks import resolve_tasks

    sample = tmp_path / "sample.csv"
    _write(sample, [{"text": f"{word} number {i}", "label": word} for word in ("card", "pin", "loan") for i in range(6)])
    task = f"clustering:{sample}"
    scores = run_tasks(tiny_st, task, progress=False)[task]
    assert 100 / 3 <= scores["acc"] <= 100
    assert task not in resolve_tasks("clustering") and task not in resolve_tasks("all")
    with pytest.raises(ValueError, match="model selection needs a dev"):
        selection_metrics([task])  # transductive: never a selection score
    for bad, message in ((tmp_path / "none.csv", "no such file"), (tmp_path / "x.csv", "needs the columns text,label")):
        (tmp_path / "x.csv").write_text("body,tag\na,b\n")
        with pytest.raises(RecipeError, match=message):
            load_recipe(name="adapt-tweet", overrides=[f"eval.after=clustering:{bad}"])
