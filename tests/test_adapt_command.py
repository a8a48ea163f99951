"""``augcse adapt``: end to end on 200 real tweets with the tiny random model (train, candidates, criteria,
choice, final/, report, what ran), a resume after an interrupt (on the same texts only), and a chooser that never
sees labels. Its refusals of wrong inputs: tests/test_adapt_inputs.py."""

from __future__ import annotations

import csv
import inspect
import json
import os
import shlex
import signal
import sys
from pathlib import Path

import pytest

from augcse.commands.main import main

FAST = ["--budgets", "2,4", "--alphas", "0.5,1", "--held-out", "48", "--clusters", "4",
        "training.per_device_train_batch_size=8", "model.max_seq_length=16", "eval.batch_size=16"]


@pytest.fixture(scope="module")
def tweets(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """200 tweets (text,label) and a labelled sample of them: up to 10 texts of each of the 6 largest labels."""
    with open(data_dir / "clustering/tweet.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:200]
    folder = tmp_path_factory.mktemp("tweets")
    labels = sorted({r["label"] for r in rows}, key=lambda lab: -sum(r["label"] == lab for r in rows))[:6]
    sample = [r for lab in labels for r in [r for r in rows if r["label"] == lab][:10]]  # 10 texts a label
    for name, part in (("tweets.csv", rows), ("sample.csv", sample)):
        with open(folder / name, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["text", "label"])
            writer.writeheader()
            writer.writerows({"text": r["text"], "label": r["label"]} for r in part)
    return folder / "tweets.csv", folder / "sample.csv"


def test_end_to_end_on_a_csv(tweets, tiny_model_dir, tmp_path, monkeypatch, capsys):
    from sentence_transformers import SentenceTransformer

    from augcse.training import adapt

    seen = []
    real_choose = adapt.choose

    def spy(records, *args):
        seen.extend(records)
        return real_choose(records, *args)

    monkeypatch.setattr(adapt, "choose", spy)
    monkeypatch.chdir(tmp_path)
    texts, sample = tweets
    code = main(["adapt", str(texts), "--sample", str(sample), f"model.backbone={tiny_model_dir}", "name=t", *FAST])
    assert code == 0
    run = tmp_path / "runs" / "t"
    record = json.loads((run / "adapt.json").read_text())
    assert [(c["step"], c["alpha"]) for c in record["candidates"]] == [(0, 0), (2, 0.5), (2, 1), (4, 0.5), (4, 1)]
    assert all(c["criteria"]["alignment"] > 0 for c in record["candidates"])  # two dropout views, not one twice
    assert all("sample" not in c and set(c) == {"step", "alpha", "criteria"} for c in record["chooser_inputs"])
    assert len(seen) == 5 and all(set(c) == {"step", "alpha", "criteria"} for c in seen)  # what choose received
    assert all("clustering:" in next(iter(c["sample"])) for c in record["candidates"])
    verdict = record["verdict"]
    assert verdict.startswith(("kept the starting model: ", "kept step "))
    assert (run / "adapt.md").read_text().splitlines()[0] == f"# {verdict}"
    assert (run / "adapt.html").is_file() and (run / "adapt.png").is_file()
    assert verdict in capsys.readouterr().out.splitlines()
    assert SentenceTransformer(str(run / "final")).encode(["a tweet"]).shape == (1, 32)
    assert_what_ran(record["inputs"], run, texts, sample)


def assert_what_ran(inputs: dict, run: Path, texts: Path, sample: Path) -> None:
    """adapt.json's inputs: each as given and as used; the texts' copy inside the run folder, where recipe.yaml
    points; nothing beside the run folder."""
    import hashlib

    import yaml

    digest = hashlib.sha256(texts.read_bytes()).hexdigest()
    assert inputs["texts"] == {"given": str(texts), "absolute": str(texts.resolve()), "sha256": digest,
                               "column": "text", "held_out": 48, "seed": 42, "texts_read": 200, "train_texts": 152,
                               "copy": {"train": "texts/train.txt", "held_out": "texts/held-out.txt"}}
    assert inputs["column"] == {"given": None, "used": "text"}
    assert inputs["method"] == {"given": None, "used": "simcse"}  # null: left at its default
    assert inputs["budgets"] == {"given": "2,4", "used": [2, 4]}
    assert inputs["alphas"] == {"given": "0.5,1", "used": [0.5, 1.0]}
    assert inputs["held_out"] == {"given": "48", "used": 48} and inputs["clusters"] == {"given": "4", "used": 4}
    assert inputs["sample"] == {"given": str(sample), "absolute": str(sample.resolve()),
                                "sha256": hashlib.sha256(sample.read_bytes()).hexdigest()}
    train = (run / "texts" / "train.txt").read_text().splitlines()
    held = (run / "texts" / "held-out.txt").read_text().splitlines()
    with open(texts, encoding="utf-8", newline="") as f:
        assert sorted(train + held) == sorted(r["text"].strip() for r in csv.DictReader(f))
    assert len(held) == 48 and len(train) == 152
    assert json.loads((run / "texts" / "source.json").read_text()) == {
        k: inputs["texts"][k] for k in ("given", "absolute", "sha256", "column", "held_out", "seed")}
    recipe = yaml.safe_load((run / "recipe.yaml").read_text())
    assert Path(recipe["data"]["corpus"]) == (run / "texts" / "train.txt").resolve()
    assert recipe["training"]["max_steps"] == 4
    assert sorted(p.name for p in run.parent.iterdir()) == [run.name]  # no copy of the texts beside the run
    report = (run / "adapt.md").read_text()
    assert "What ran" in report and digest[:16] in report and "provisional" not in report


def test_keeping_the_start_leaves_the_starting_weights(tweets, tiny_model_dir, tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("augcse.training.adapt.MIN_AGREEMENT", 2.0)  # nothing can keep 200 % of its neighbours
    assert main(["adapt", str(tweets[0]), f"model.backbone={tiny_model_dir}", "name=k", *FAST]) == 0
    run = tmp_path / "runs" / "k"
    assert json.loads((run / "adapt.json").read_text())["verdict"].startswith("kept the starting model: ")
    start = load_file(str(run / "candidates" / "step-0.safetensors"))
    final = SentenceTransformer(str(run / "final")).state_dict()
    assert all(torch.equal(final[k], v) for k, v in start.items())


def test_resume_after_an_interrupt(tweets, tiny_model_dir, tmp_path, monkeypatch, capsys):
    """A run stopped after step 2 (its checkpoint kept) names the user's own command to continue it, continues
    with --resume and ends with every candidate; a resume on a changed texts file is refused in one line, the run
    left as it was."""
    from augcse.training import snapshots

    monkeypatch.chdir(tmp_path)
    texts = tmp_path / "tweets.csv"
    texts.write_bytes(tweets[0].read_bytes())
    args = ["adapt", str(texts), f"model.backbone={tiny_model_dir}", "name=r", "training.save_steps=2", *FAST]
    real = snapshots.Snapshots.on_step_end

    def interrupt(self, args_, state, control, **kwargs):
        real(self, args_, state, control, **kwargs)
        if state.global_step == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: training stops at the next step's end

    monkeypatch.setattr(snapshots.Snapshots, "on_step_end", interrupt)
    monkeypatch.setattr(sys, "argv", ["augcse", *args, "--overwrite"])  # as a shell starts it
    assert main([*args, "--overwrite"]) == 130
    stop = capsys.readouterr().out.strip().splitlines()[-1]  # the user's own command, to continue it
    assert stop.endswith(f"Continue with: {shlex.join(['augcse', *args, '--resume'])}") and "checkpoint-4" not in stop
    run = tmp_path / "runs" / "r"
    assert not (run / "summary.json").exists() and (run / "candidates" / "step-2.safetensors").is_file()
    monkeypatch.setattr(snapshots.Snapshots, "on_step_end", real)
    kept = texts.read_bytes()
    texts.write_bytes(kept + b"one more tweet,x\n")
    assert main([*args, "--resume"]) == 2
    assert "is not the texts file this run started with" in capsys.readouterr().err
    assert (run / "checkpoint-2").is_dir() and not (run / "adapt.json").exists()
    texts.write_bytes(kept)
    assert main([*args, "--resume"]) == 0
    record = json.loads((run / "adapt.json").read_text())
    assert [c["step"] for c in record["candidates"]] == [0, 2, 2, 4, 4]


def test_a_fault_line_continues_with_the_users_adapt_command(tweets, tiny_model_dir, tmp_path, monkeypatch, capsys):
    """A loss that turns NaN at step 3: one line, exit 1, continuing from checkpoint-2 with the user's own adapt
    command (``augcse train`` on the recipe would end without choosing a candidate)."""
    import augcse.training.build as build

    real, calls = build.build_loss, iter(range(1, 1000))

    def poisoned(recipe, model):
        loss = real(recipe, model)
        loss.register_forward_hook(lambda module, inputs, out: {k: v * float("nan") for k, v in out.items()}
                                   if module.training and next(calls) == 3 else None)
        return loss

    monkeypatch.setattr(build, "build_loss", poisoned)
    monkeypatch.chdir(tmp_path)
    args = ["adapt", str(tweets[0]), f"model.backbone={tiny_model_dir}", "name=f", "training.save_steps=2", *FAST]
    monkeypatch.setattr(sys, "argv", ["augcse", *args])
    assert main(args) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("augcse adapt: error:")]
    assert "checkpoint-2 is the last good checkpoint" in line and "augcse train" not in line
    assert f"e.g. {shlex.join(['augcse', *args])} training.learning_rate=" in line and line.endswith(" --resume, or "
                                                                                                       "allow skipped steps with skip_nonfinite_steps=N")


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet", ".txt"])
def test_every_kind_of_texts_file_gives_its_column_alone(tmp_path, suffix):
    import pandas as pd

    from augcse.training.adapt import read_texts

    frame = pd.DataFrame({"body": [f"text number {i}" for i in range(40)], "label": ["x"] * 40})
    path = tmp_path / f"texts{suffix}"
    {".csv": lambda: frame.to_csv(path, index=False), ".tsv": lambda: frame.to_csv(path, sep="\t", index=False),
     ".jsonl": lambda: frame.to_json(path, orient="records", lines=True),
     ".parquet": lambda: frame.to_parquet(path),
     ".txt": lambda: path.write_text("\n".join(frame["body"]) + "\n")}[suffix]()
    assert read_texts(path, "body") == list(frame["body"])


def test_the_chooser_never_sees_labels():
    """Its only input is the criteria records: a label or a sample score in them is not read, and the command
    strips them before the call."""
    from augcse.training.adapt import choose

    assert list(inspect.signature(choose).parameters) == ["records", "min_agreement"]
    records = [{"step": 0, "alpha": 0.0, "criteria": {"heldout_loss": 2.0, "knn_overlap": 1.0}},
               {"step": 4, "alpha": 0.25, "criteria": {"heldout_loss": 1.8, "knn_overlap": 0.97}},
               {"step": 4, "alpha": 0.5, "criteria": {"heldout_loss": 1.5, "knn_overlap": 0.94}},
               {"step": 4, "alpha": 1.0, "criteria": {"heldout_loss": 1.0, "knn_overlap": 0.2}}]
    assert (choose(records).step, choose(records).alpha) == (4, 0.5)  # the furthest above the 93 % floor
    labelled = [{**r, "sample": {"clustering": 100.0 * (r["step"] == 0)}} for r in records]
    assert choose(labelled) == choose(records)
    assert choose(records[:1] + records[3:]).verdict.startswith("kept the starting model: ")


@pytest.mark.parametrize("grid_name", ["adapt-select", "adapt-heldout"])
def test_the_study_grids_plan_valid_adapt_runs(grid_name, data_dir, tmp_path, monkeypatch):
    """Dry run: each (set, seed) of the design and held-out grids passes every input check of ``augcse adapt``
    (the seeded sample files written once: 4,000 or 2,000 labelled rows); nothing trains."""
    import augcse.commands.adapt as command
    from augcse.studies.adapt_select import plan

    grid = Path(command.__file__).parents[1] / f"data/studies/{grid_name}.yaml"
    lines = plan(grid, data_dir, tmp_path / "study")
    assert len(lines) == 12 and len({line[1] for line in lines}) == 4
    for sample in (tmp_path / "study" / "samples").glob("*.csv"):
        with open(sample, encoding="utf-8", newline="") as f:
            assert len(list(csv.DictReader(f))) in (2000, 4000)
    assert lines == plan(grid, data_dir, tmp_path / "study")  # the same rows on a second plan

    class Checked(Exception):
        pass

    def stop() -> None:
        raise Checked

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(command, "begin_work", stop)
    for line in lines:
        with pytest.raises(Checked):
            main(line)
    assert not list((tmp_path / "runs").glob("*/summary.json"))
