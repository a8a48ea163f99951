"""Fault injection: ``augcse augment`` killed with SIGKILL at random points, resumed, ends identical.

One cache folder is built by the augment command in a child process that is SIGKILLed again and
again at random moments (once a random number of further shards is finished, plus a random delay, so kills land
inside a shard, between shards and around the final statistics); a last run resumes it. The
result must equal an uninterrupted build, statistics included, and no temporary shard may be left.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from augcse.text import augment
from augcse.text.augment.cache import load_stats

AUGS = "RandomSwap,ContractionExpansions,WordRepetition,SwitchCase"
N_SENTENCES, SHARD_SIZE = 48, 2

# ``augcse augment`` itself (the sub-command's parser and run function), without the other sub-commands'
# imports, so that each restart costs only the augmentation library's start-up.
DRIVER = textwrap.dedent("""
    import argparse, sys
    from augcse.commands import augment as cli

    parser = argparse.ArgumentParser(prog="augcse")
    cli.add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["augment", *sys.argv[1:]])
    sys.exit(args.func(args))
""")


def shards_done(out: Path) -> int:
    return len([p for p in (out / "shards").glob("[0-9]*") if p.is_dir()]) if (out / "shards").is_dir() else 0


def complete(out: Path) -> bool:
    manifest = out / "manifest.json"
    return manifest.is_file() and '"complete": true' in manifest.read_text()


def kill_at_random_points(command: list[str], env: dict, out: Path, n_shards: int, seed: int,
                          kills: int) -> list[dict]:
    """Start ``command`` ``kills`` times, SIGKILL each at a random point; returns what each kill hit."""
    rng = random.Random(seed)
    log = []
    for _ in range(kills):
        if complete(out):
            break
        before = shards_done(out)
        target = rng.randint(min(before + 1, n_shards - 2), n_shards - 2)
        delay = rng.uniform(0, 0.01)  # a shard takes a few ms: a longer delay would often miss the build
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and shards_done(out) < target and proc.poll() is None:
            time.sleep(0.005)
        time.sleep(delay)
        finished = proc.poll() is not None
        if not finished:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        log.append({"shards_before": before, "target": target, "shards_after": shards_done(out),
                    "exited_before_kill": finished})
    return log


@pytest.mark.parametrize("seed,kills", [(0, 2)] + [pytest.param(s, 4, marks=pytest.mark.slow) for s in range(1, 6)])
def test_random_sigkills_then_resume_equal_an_uninterrupted_build(seed, kills, tmp_path, data_dir):
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()
    sentences = [s.strip() for s in lines if s.strip()][:N_SENTENCES]
    corpus, driver, out = tmp_path / "corpus.txt", tmp_path / "augment.py", tmp_path / "killed"
    corpus.write_text("\n".join(sentences), encoding="utf-8")
    driver.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, str(driver), "--corpus", str(corpus), "--out", str(out), "--augs", AUGS,
               "--seed", "3", "--shard-size", str(SHARD_SIZE), "--param", "SwitchCase.p=0.3"]
    n_shards = N_SENTENCES // SHARD_SIZE
    log = kill_at_random_points(command, env, out, n_shards, seed, kills)
    print(f"seed {seed}: kills {log}")
    assert any(0 < k["shards_after"] < n_shards and not k["exited_before_kill"] for k in log), log
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    fresh = augment.build_cache(sentences, AUGS, tmp_path / "fresh", seed=3, shard_size=SHARD_SIZE,
                                params={"SwitchCase": {"p": 0.3}}, progress=False)
    assert augment.load_cache(out).to_dict() == fresh.to_dict()
    assert load_stats(out) == load_stats(tmp_path / "fresh")
    assert not list((out / "shards").glob(".tmp-*"))


def without_wordnet(tmp_path: Path) -> dict:
    """An environment in which NLTK finds no WordNet (no NLTK_DATA, no data directory holding nltk_data)."""
    empty = tmp_path / "no-nltk-data"
    empty.mkdir(exist_ok=True)
    return {**os.environ, "NLTK_DATA": str(empty), "AUGCSE_DATA": str(empty), "HF_HUB_OFFLINE": "1"}


def augcse(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "augcse", *args], env=env, capture_output=True, text=True,
                          timeout=600)


def test_without_wordnet_the_build_stops_naming_it_and_an_allowed_build_is_redone_with_it(tmp_path, data_dir):
    import json

    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:30]
    corpus, out = tmp_path / "corpus.txt", tmp_path / "cache"
    corpus.write_text("\n".join(lines) + "\n")
    build = ("augment", "--corpus", str(corpus), "--augs", "SynonymSubstitution", "--out", str(out))
    refused = augcse(*build, env=without_wordnet(tmp_path))
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert refused.stderr.strip().splitlines() == [
        "augcse augment: error: SynonymSubstitution cannot run: WordNet not found on NLTK's data path; run "
        "`python -m nltk.downloader wordnet` or set NLTK_DATA to a folder holding corpora/wordnet.zip (e.g. "
        "<data dir>/nltk_data); or pass --allow-errors (allow_errors=True) to keep those sentences unchanged instead"]
    assert not (out / "manifest.json").exists()

    allowed = augcse(*build, "--allow-errors", env=without_wordnet(tmp_path))
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    stats = load_stats(out)["SynonymSubstitution"]
    # every sentence with a content word raised (the rest had nothing to look up)
    assert stats["changed"] == 0 and stats["sentences"] == 30 and 20 < stats["errors"] <= 30
    assert json.loads((out / "manifest.json").read_text())["resources"]["wordnet"].startswith("missing: WordNet")

    with_wordnet = augcse(*build, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert with_wordnet.returncode == 0, with_wordnet.stderr[-2000:]
    assert "rebuilding the cache" in with_wordnet.stderr
    stats = load_stats(out)["SynonymSubstitution"]
    assert stats["errors"] == 0 and stats["perturbation_rate"] > 0.5
    assert json.loads((out / "manifest.json").read_text())["resources"] == {"wordnet": "available"}


def test_training_a_view_that_needs_wordnet_without_it_is_one_line(tmp_path, tiny_model_dir, data_dir):
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:40]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    result = augcse("train", "--recipe", "augcse-minilm", f"model.backbone={tiny_model_dir}", "model.pooler=cls",
                    "data.views[0].augmentations=12-2-aug",  # with SentenceAdjectivesAntonymsSwitch (WordNet)
                    f"data.corpus={tmp_path / 'corpus.txt'}", "data.limit=32", "eval.after=null",
                    "training.max_steps=1", "training.per_device_train_batch_size=8",
                    f"output_dir={tmp_path / 'runs'}", env=without_wordnet(tmp_path))
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "SentenceAdjectivesAntonymsSwitch cannot run: WordNet not found" in errors[0] and "--allow-errors" in errors[0]
    assert not (tmp_path / "runs" / "augcse-minilm" / "final").exists()


def test_a_missing_network_is_found_out_once_and_named(monkeypatch):
    import socket

    from augcse.text.augment import model_based

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    tries = []

    def unreachable(address, timeout=None, *args, **kwargs):
        tries.append(address)
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    model_based.hub_unreachable.cache_clear()
    model_based._load_cached.cache_clear()
    try:
        for name in ("Casual2Formal", "BackTranslation", "DiverseParaphrase"):
            with pytest.raises(augment.AugmentationError) as info:
                augment.get(name).apply(["A sentence."])
            assert "the Hugging Face Hub cannot be reached (huggingface.co:443: Network is unreachable)" in str(info.value)
            assert "\n" not in str(info.value)
    finally:
        model_based.hub_unreachable.cache_clear()
    assert tries == [("huggingface.co", 443)], "asked once, not once per model"
