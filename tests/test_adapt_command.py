"""``augcse adapt``: end to end on 200 real tweets with the tiny random model (train, candidates, criteria,
choice, final/, report), its refusals, a resume after an interrupt, and a chooser that never sees labels."""

from __future__ import annotations

import csv
import inspect
import json
from pathlib import Path

import pytest

from augcse.commands.main import main

FAST = ["--budgets", "2,4", "--alphas", "0,0.5,1", "--held-out", "48", "--clusters", "4",
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


def test_resume_after_an_interrupt(tweets, tiny_model_dir, tmp_path, monkeypatch):
    """A run stopped after step 2 (its checkpoint kept) continues with --resume and ends with every candidate."""
    from augcse.training import snapshots

    monkeypatch.chdir(tmp_path)
    args = ["adapt", str(tweets[0]), f"model.backbone={tiny_model_dir}", "name=r", "training.save_steps=2", *FAST]
    real = snapshots.Snapshots.on_step_end

    def interrupt(self, args_, state, control, **kwargs):
        real(self, args_, state, control, **kwargs)
        if state.global_step == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(snapshots.Snapshots, "on_step_end", interrupt)
    assert main(args) == 130
    run = tmp_path / "runs" / "r"
    assert not (run / "summary.json").exists() and (run / "candidates" / "step-2.safetensors").is_file()
    monkeypatch.setattr(snapshots.Snapshots, "on_step_end", real)
    assert main([*args, "--resume"]) == 0
    record = json.loads((run / "adapt.json").read_text())
    assert [c["step"] for c in record["candidates"]] == [0, 2, 2, 4, 4]


@pytest.mark.parametrize("extra, message", [
    (["--method", "simcsee"], "--method simcsee: unknown"),
    (["--alphas", "0,1.5"], "--alphas"),
    (["--budgets", "4,4"], "budgets"),
    (["--choose-by-sample"], "--choose-by-sample needs --sample"),
    (["--sample", "nowhere.csv"], "--sample nowhere.csv: no such file"),
    (["--column", "body"], "no column 'body'"),
    (["loss.nme=simcse"], "loss.nme"),
])
def test_refusals_are_one_line_before_anything_loads(tweets, tmp_path, monkeypatch, capsys, extra, message):
    monkeypatch.chdir(tmp_path)
    assert main(["adapt", str(tweets[0]), "--held-out", "48", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "runs" / "adapt-tweets").exists()


@pytest.mark.parametrize("name, content, message", [
    ("texts.xlsx", "x", "unknown kind of file .xlsx"),
    ("missing.csv", None, "no such file"),
    ("few.txt", "one\ntwo\n", "non-empty texts; adapt needs at least"),
    ("bad.jsonl", "{not json\n", "line 1 is not JSON"),
    ("latin.txt", b"caf\xe9\n", "is not utf-8"),
])
def test_a_wrong_texts_file_is_named(tmp_path, monkeypatch, capsys, name, content, message):
    monkeypatch.chdir(tmp_path)
    if isinstance(content, bytes):
        (tmp_path / name).write_bytes(content)
    elif content is not None:
        (tmp_path / name).write_text(content)
    assert main(["adapt", name]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0] and message in err[0]


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
