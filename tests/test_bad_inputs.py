"""Every wrong input is refused in one line with exit 2 before anything loads, and nothing is written."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from augcse.commands.main import main


@pytest.fixture()
def recipe(tmp_path, tiny_model_dir, data_dir) -> Path:
    """A valid two-step recipe on the tiny model: a bad input that slipped through would train, and fail the test."""
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:40]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    values = {
        "name": "bad", "output_dir": str(tmp_path / "runs"),
        "model": {"backbone": str(tiny_model_dir), "pooler": "avg", "max_seq_length": 16},
        "data": {"corpus": str(tmp_path / "corpus.txt"), "limit": 32},
        "loss": {"name": "simcse", "params": {"temperature": 0.05}},
        "eval": {"dev": None, "before": None, "after": None},
        "training": {"per_device_train_batch_size": 8, "max_steps": 2},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


BAD = [  # (override or CLI arguments, what the one line says)
    ("data.limt=5", "unknown recipe key 'data.limt' (did you mean 'limit'?)"),
    ("training.learnin_rate=1e-5", "unknown recipe key 'training.learnin_rate' (did you mean 'learning_rate'"),
    ("training.learning_rate=-1", "'training.learning_rate' must be > 0"),
    ("training.num_train_epochs=one", "'training.num_train_epochs' must be a number, got 'one'"),
    ("training.per_device_train_batch_size=0", "'training.per_device_train_batch_size' must be > 0"),
    ("training.max_steps=0", "'training.max_steps' must be a positive integer (or -1 for epochs), got 0"),
    ("training.warmup_ratio=1.5", "'training.warmup_ratio' must be <= 1, got 1.5"),
    ("training.lr_scheduler_type=linearr", "'training.lr_scheduler_type' must be one of 'linear'"),
    ("training.save_strategy=sometimes", "'training.save_strategy' must be one of 'no', 'steps'"),
    ("training.report_to=tensorbored", "unknown logging backend 'tensorbored' (did you mean 'tensorboard'?)"),
    ("training.report_to=comet_ml", "comet_ml is not installed; pip install comet_ml"),
    ("training.output_dir=x", "output_dir comes from the recipe's output_dir and name"),
    ("model.pooler=maxx", "'model.pooler' must be one of 'cls', 'cls_before_pooler', 'avg'"),
    ("model.max_seq_length=0", "'model.max_seq_length' must be > 0"),
    ("model.backbone=/nonexistent/folder", "model path '/nonexistent/folder' does not exist"),
    ("model.backbone=someone/not-a-model", "no local folder, no packaged copy"),
    ("loss.name=simclr", "recipe key 'loss.name': unknown loss 'simclr' (did you mean 'simcse' or 'esimcse' or 'sccl'?); choose one of simcse, augcse"),
    ("data.shuffle=maybe", "'data.shuffle' must be true or false"),
    ("data.limit=-5", "'data.limit' must be > 0"),
    ("data.limit=0", "'data.limit' must be > 0"),
    ("data.min_words=-1", "'data.min_words' must be >= 0, got -1"),
    ("data.corpus=/x/mytypo.txt", "'data.corpus': /x/mytypo.txt does not exist"),
    ("data.views=[{name: nope}]", "unknown view 'nope'"),
    ("eval.after=STSB", "'eval.after': unknown task or suite 'STSB'"),
    ("eval.dev=nonsense", "'eval.dev': unknown task or suite 'nonsense'"),
    ("eval.batch_size=abc", "'eval.batch_size' must be an integer"),
    ("seed=-1", "'seed' must be >= 0, got -1"),
    ("name=..", "'name' must be a folder name"),
    ("name=a/b", "'name' must be a folder name"),
    ("output_dir=FILE", "'output_dir': FILE: exists and is not a folder"),
    (("--resume", "--overwrite"), "--resume and --overwrite contradict each other"),
    (("--resume",), "holds no run yet; there is nothing to resume: start it without --resume"),
]


@pytest.mark.parametrize(("bad", "message"), BAD, ids=[str(b) for b, _ in BAD])
def test_bad_input_one_line_exit_2_nothing_written(bad, message, recipe, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(logging.root, "handlers", [logging.NullHandler()])  # only the error line reaches stderr
    file_in_the_way = tmp_path / "a-file"
    file_in_the_way.write_text("x")
    args = list(bad) if isinstance(bad, tuple) else [bad.replace("FILE", str(file_in_the_way))]
    code = main(["train", str(recipe), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("augcse train: error: "), err
    assert message.replace("FILE", str(file_in_the_way)) in err[0]
    shown = " ".join(args).replace(str(file_in_the_way), "<a file>")
    print(f"| `{shown}` | {code} | {err[0].replace(str(tmp_path), '<tmp>').replace('|', '/')} |")  # the table of docs/FAULTS.md (-s)
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.rglob("*")), sorted(runs.rglob("*"))


def test_table_is_large_enough():
    assert len(BAD) >= 25


def test_real_command_has_no_traceback(recipe, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "augcse", "train", str(recipe), "training.num_train_epochs=one"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "augcse train: error: recipe key 'training.num_train_epochs' must be a number, got 'one'"]


METHOD_PARAMETERS = [  # (built-in recipe, override, what the one line says): view and loss parameters
    ("augcse-minilm", "data.views[0].augmentaions=8-aug", "unknown recipe key 'data.views[0].augmentaions' (did you mean 'augmentations'?)"),
    ("sda-minilm", "data.views[0].proportion=lots", "'data.views[0].proportion' must be a number, got 'lots'"),
    ("cards-minilm", "data.views[0].sampling=R_random", "must be one of 'R_uniform', 'R_top', 'D_uniform'"),
    ("sda-minilm", "data.views[0].variant=book", "'data.views[0].variant' must be one of 'code', 'paper'"),
    ("augcse-minilm", "loss.params.augmentations=8-aug", "expects 9 label classes ('8-aug') but the view writes 7"),
    ("vascl-minilm", "loss.params.detach=sometimes", "'loss.params.detach' must be true or false, got 'sometimes'"),
]


@pytest.mark.parametrize(("recipe", "override", "message"), METHOD_PARAMETERS, ids=[o for _, o, _ in METHOD_PARAMETERS])
def test_method_parameters_are_refused_before_the_model_loads(recipe, override, message, tmp_path, capsys,
                                                               monkeypatch):
    import sentence_transformers

    monkeypatch.setattr(logging.root, "handlers", [logging.NullHandler()])
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", None)  # loading a model would crash
    code = main(["train", "--recipe", recipe, override, f"output_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "runs").exists()
