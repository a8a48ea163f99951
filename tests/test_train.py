"""End-to-end training on a tiny model: run directory, export, exact resume after SIGKILL, refusals."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from augcse.assets.resolve import AssetError
from augcse.training.recipes.config import RecipeError, load_recipe


def write_recipe(path: Path, backbone: Path, corpus: Path, out: Path, **extra) -> Path:
    recipe = {
        "name": "tiny",
        "seed": 7,
        "output_dir": str(out),
        "model": {"backbone": str(backbone), "pooler": "cls", "max_seq_length": 16},
        "data": {"corpus": str(corpus), "limit": 96},
        "loss": {"name": "simcse", "params": {"temperature": 0.05, "head": "mlp"}},  # SimCSE's CLS head
        "eval": {"dev": "STSBenchmark-dev-original", "before": None, "after": "STSBenchmark-original"},
        "training": {"per_device_train_batch_size": 8, "max_steps": 8, "eval_steps": 4, "logging_steps": 1,
                     "learning_rate": 1e-3},
    }
    for key, value in extra.items():
        section, name = key.split("__")
        recipe[section][name] = value
    path.write_text(yaml.safe_dump(recipe))
    return path


@pytest.fixture()
def corpus(tmp_path, data_dir) -> Path:
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:120]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def augcse(*args: str, cwd: Path, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "augcse", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=600, **kwargs)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_train_writes_run_directory_and_exports(tmp_path, tiny_model_dir, corpus, data_dir):
    from sentence_transformers import SentenceTransformer

    from augcse.commands.encode import encode, load_model

    recipe = write_recipe(tmp_path / "r.yaml", tiny_model_dir, corpus, tmp_path / "runs")
    augcse("train", str(recipe), "--data-dir", str(data_dir), cwd=tmp_path)
    run = tmp_path / "runs" / "tiny"
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    losses = [r for r in log if "contrastive" in r]
    evals = [r for r in log if "eval_dev_score" in r]
    assert len(losses) == 8 and all(np.isfinite(r["contrastive"]) for r in losses)
    assert [r["step"] for r in evals] == [4, 8]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_step"] in (4, 8) and summary["corpus_stats"]["kept"] == 96
    saved = json.loads((run / "eval.json").read_text())
    assert "STSBenchmark-original" in saved["after"]
    versions = saved["versions"]["after"]  # what the scores were computed with
    assert versions["model"]["sha256"] == hashlib.sha256((run / "final/model.safetensors").read_bytes()).hexdigest()
    assert versions["data"] and all(f["as_recorded"] for f in versions["data"].values())
    resolved = yaml.safe_load((run / "recipe.yaml").read_text())
    assert resolved["loss"]["name"] == "simcse" and resolved["training"]["max_steps"] == 8
    # the export: plain SentenceTransformer, no train-only head, same embeddings as `augcse encode`
    final = run / "final"
    sentences = ["A man is playing a guitar.", "Stocks fell sharply on Monday."]
    plain = SentenceTransformer(str(final)).encode(sentences)
    ours = encode(load_model(str(final)), sentences)
    np.testing.assert_allclose(plain, ours, atol=1e-5)
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n")
    augcse("encode", str(final), str(tmp_path / "in.txt"), "--out", str(tmp_path / "e.npy"), cwd=tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), plain, atol=1e-5)
    exported = SentenceTransformer(str(final))
    assert [type(m).__name__ for m in exported] == ["Transformer", "Pooling"]  # no train-only MLP
    assert exported.max_seq_length > 16, "max_seq_length truncates training batches only, not evaluation"
    card = (final / "README.md").read_text()
    assert "### Recipe" in card and "STSBenchmark-original" in card


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_interrupt_and_sigkill_then_resume_equal_uninterrupted(tmp_path, tiny_model_dir, corpus, data_dir):
    common = dict(eval__dev=None, eval__after=None,
                  training__max_steps=12, training__save_steps=3, training__save_strategy="steps")
    straight = write_recipe(tmp_path / "a.yaml", tiny_model_dir, corpus, tmp_path / "a", **common)
    augcse("train", str(straight), cwd=tmp_path)

    killed = write_recipe(tmp_path / "b.yaml", tiny_model_dir, corpus, tmp_path / "b", **common)
    run_dir = tmp_path / "b" / "tiny"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}

    def start(*extra: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "augcse", "train", str(killed), *extra], cwd=tmp_path,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_for(proc: subprocess.Popen, marker: Path) -> None:
        deadline = time.time() + 300
        while not marker.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the run never wrote {marker}"

    # Ctrl-C: the step in progress finishes, a resumable checkpoint is saved, exit code 130
    proc = start()
    wait_for(proc, run_dir / "checkpoint-3" / "loss_state.pt")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=300) == 130
    assert not (run_dir / "final").exists()
    interrupted_at = max(int(p.name.split("-")[1]) for p in run_dir.glob("checkpoint-*"))
    assert interrupted_at < 12

    # SIGKILL after the next checkpoint of the resumed run: nothing is saved on the way out
    proc = start("--resume")
    target = (interrupted_at // 3 + 1) * 3
    wait_for(proc, run_dir / f"checkpoint-{target}" / "loss_state.pt")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run_dir / "final").exists(), "killed before the end"
    augcse("train", str(killed), "--resume", cwd=tmp_path)

    a, b = _weights(tmp_path / "a" / "tiny" / "final"), _weights(tmp_path / "b" / "tiny" / "final")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6, msg=key)
    log_a = [json.loads(l) for l in (tmp_path / "a/tiny/log.jsonl").read_text().splitlines() if "contrastive" in l]
    log_b = [json.loads(l) for l in (tmp_path / "b/tiny/log.jsonl").read_text().splitlines() if "contrastive" in l]
    by_step = {r["step"]: r["contrastive"] for r in log_b}
    assert [by_step[r["step"]] for r in log_a] == pytest.approx([r["contrastive"] for r in log_a], rel=1e-5)


def test_second_run_without_resume_is_refused(tmp_path, tiny_model_dir, corpus):
    recipe = write_recipe(tmp_path / "r.yaml", tiny_model_dir, corpus, tmp_path / "runs")
    checkpoint = tmp_path / "runs" / "tiny" / "checkpoint-3"
    checkpoint.mkdir(parents=True)
    (checkpoint.parent / ".augcse-run").write_text("")  # the marker every run folder gets when claimed
    (checkpoint / "trainer_state.json").write_text("{}")
    (checkpoint / "loss_state.pt").write_bytes(b"")
    result = augcse("train", str(recipe), cwd=tmp_path, check=False)
    assert result.returncode == 2 and "pass --resume to continue from checkpoint-3" in result.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.limt=5", "unknown recipe key 'data.limt'"),
        ("training.learnin_rate=1e-5", "unknown recipe key 'training.learnin_rate'"),
        ("training.learning_rate=-1", "must be > 0"),
        ("model.pooler=maxx", "recipe key 'model.pooler' must be one of 'cls'"),
        ("loss.name=simclr", "unknown loss 'simclr'"),
        ("data.shuffle=maybe", "must be true or false"),
    ],
)
def test_bad_recipes_are_refused_with_one_line(override, message):
    with pytest.raises(RecipeError, match=message) as info:
        load_recipe(name="quickstart", overrides=[override])
    assert "\n" not in str(info.value)


def test_a_bare_no_is_the_strategy_no():
    """YAML 1.1 reads ``save_strategy=no`` as false; where the trainer's choices include "no", that is what it
    means. A boolean option stays a boolean."""
    recipe = load_recipe(name="quickstart", overrides=["training.save_strategy=no", "training.eval_strategy=no",
                                                       "training.fp16=no"])
    assert recipe.training["save_strategy"] == "no" and recipe.training["eval_strategy"] == "no"
    assert recipe.training["fp16"] is False
    with pytest.raises(RecipeError, match="must be one of 'no'"):
        load_recipe(name="quickstart", overrides=["training.save_strategy=yes"])


def test_unknown_recipe_and_cli_error_line(tmp_path):
    with pytest.raises(RecipeError, match="built-in recipes: .*quickstart"):
        load_recipe(name="nope")
    result = augcse("train", "--recipe", "quickstart", "data.limt=5", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("augcse train: error: unknown recipe key 'data.limt'")


def test_builtin_paper_recipes_resolve_and_start(tmp_path, tiny_model_dir, corpus, data_dir):
    """The GPU recipes keep the paper's hyper-parameters; a local tiny folder stands in for the Hub name."""
    for name in ("simcse-bert-base", "simcse-roberta-base"):
        recipe = load_recipe(name=name)
        assert recipe.model.pooler == "cls" and recipe.loss.params["temperature"] == 0.05
    bert = load_recipe(name="simcse-bert-base")
    assert bert.training["per_device_train_batch_size"] == 64 and bert.training["learning_rate"] == 3e-5
    roberta = load_recipe(name="simcse-roberta-base")
    assert roberta.training["per_device_train_batch_size"] == 512 and roberta.training["learning_rate"] == 1e-5
    augcse("train", "--recipe", "simcse-bert-base", f"model.backbone={tiny_model_dir}", f"data.corpus={corpus}",
           "data.limit=32", "training.max_steps=2", "training.per_device_train_batch_size=8", "training.fp16=false",
           f"output_dir={tmp_path / 'runs'}", "eval.dev=null", "eval.before=null", "eval.after=null", cwd=tmp_path)
    assert (tmp_path / "runs" / "simcse-bert-base" / "final" / "modules.json").is_file()


def test_missing_model_and_missing_data_fail_clearly(tmp_path, monkeypatch):
    from augcse.assets.resolve import resolve_data, resolve_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AssetError, match="no local folder, no packaged copy"):
        resolve_model("someone/not-a-model")
    with pytest.raises(AssetError, match="does not exist"):
        resolve_model(str(tmp_path / "missing-folder"))
    monkeypatch.setenv("AUGCSE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(AssetError, match=r"data file 'transfer/MR/rt-polarity.pos' not found; tried: data directory"):
        resolve_data("transfer/MR/rt-polarity.pos", tmp_path)
    result = augcse("eval", str(tmp_path / "nope"), cwd=tmp_path, check=False)
    assert result.returncode == 2 and "does not exist" in result.stderr.strip().splitlines()[-1]


def test_every_builtin_recipe_loads_and_validates():
    from augcse.training.recipes.config import builtin_recipes

    names = builtin_recipes()
    assert {"quickstart", "simcse-bert-base", "simcse-roberta-base"} <= set(names)
    for name in names:
        recipe = load_recipe(name=name)
        assert recipe.name and isinstance(recipe.data.views, list)
    with pytest.raises(RecipeError, match="'data.views' must be a list"):
        load_recipe(name="quickstart", overrides=["data.views={name: anchor}"])
    with pytest.raises(RecipeError, match="'data.limit' must be an integer"):
        load_recipe(name="quickstart", overrides=["data.limit=lots"])


def test_the_default_corpus_is_never_downloaded(monkeypatch, tmp_path):
    """Online and without a data directory, the quickstart reads the embedded sentences its figures come from."""
    import augcse.assets.resolve as resolve
    from augcse.training.build import resolve_corpus

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    monkeypatch.setenv("AUGCSE_CACHE", str(tmp_path))
    monkeypatch.setattr(resolve, "install_on_demand", lambda *a, **k: pytest.fail("the corpus was downloaded"))
    recipe = load_recipe(None, "quickstart")
    assert resolve_corpus(recipe, None).name == "wiki_default.txt"
