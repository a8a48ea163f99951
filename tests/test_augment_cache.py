"""Augmentation cache (keys, statistics, partial caches), the CLI, and the quality signals.

Resuming after SIGKILL at random points is tested in test_augment_faults.py.
"""

from __future__ import annotations

import json

import pytest

from augcse.text import augment
from augcse.text.augment.cache import cache_key, edit_size, format_stats, load_stats

NAMES = ["Negation", "RandomSwap", "ContractionExpansions"]


@pytest.fixture(scope="module")
def wiki(data_dir):
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()
    return [s for s in lines[:30] if s.strip()]


def test_build_and_load(tmp_path, wiki):
    ds = augment.build_cache(wiki, NAMES, tmp_path / "c", seed=2, shard_size=8, progress=False)
    assert ds.column_names == ["text"] + [c for n in NAMES for c in (n, f"{n}__changed")]
    assert ds["text"] == wiki and len(ds) == len(wiki)
    assert ds["Negation"] == augment.get("Negation").apply(wiki, seed=2)
    assert ds["RandomSwap__changed"] == [a != b for a, b in zip(ds["RandomSwap"], wiki)]
    stats = load_stats(tmp_path / "c")
    assert stats["Negation"]["perturbation_rate"] == 1.0
    assert 0 < stats["RandomSwap"]["mean_edit_size"] <= 4
    assert stats["RandomSwap"]["examples"] and stats["Negation"]["errors"] == 0
    assert "| Negation | 100.00 % |" in format_stats(stats)
    assert augment.load_cache(tmp_path / "c")["Negation"] == ds["Negation"]


def test_same_key_reuses_other_key_refuses(tmp_path, wiki):
    out = tmp_path / "c"
    augment.build_cache(wiki, ["RandomSwap"], out, shard_size=10, progress=False)
    stamp = (out / "shards" / "00000").stat().st_mtime_ns
    augment.build_cache(wiki, ["RandomSwap"], out, shard_size=10, progress=False)
    assert (out / "shards" / "00000").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="other inputs"):
        augment.build_cache(wiki, ["RandomSwap"], out, seed=1, progress=False)
    ds = augment.build_cache(wiki, ["RandomSwap"], out, seed=1, overwrite=True, progress=False)
    assert ds["RandomSwap"] == augment.get("RandomSwap").apply(wiki, seed=1)


def test_key_covers_corpus_names_params_seed(wiki):
    base = cache_key(wiki, NAMES, {}, 0)
    assert cache_key(wiki[:-1], NAMES, {}, 0) != base
    assert cache_key(wiki, NAMES[:2], {}, 0) != base
    assert cache_key(wiki, NAMES, {"RandomSwap": {"p": 0.2}}, 0) != base
    assert cache_key(wiki, NAMES, {}, 1) != base
    assert cache_key(list(wiki), list(NAMES), {}, 0) == base


def test_partial_cache_is_never_read(tmp_path, wiki):
    out = tmp_path / "c"
    augment.build_cache(wiki, ["RandomSwap"], out, shard_size=10, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["complete"] = False
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="partial"):
        augment.load_cache(out)


def test_raising_augmentation_stops_the_build_unless_errors_are_allowed(tmp_path, wiki):
    from augcse.text.augment.cache import AugmentationFailed

    @augment.register
    class FailsOnDigits(augment.Augmentation):
        name, meaning, rule, source = "TestFailsOnDigits", "preserving", "test", "test"

        def rewrite(self, text, rng, doc):
            if any(ch.isdigit() for ch in text):
                raise RuntimeError("digits")
            return text + " !"

    failing = [any(ch.isdigit() for ch in s) for s in wiki]
    try:
        with pytest.raises(AugmentationFailed, match=rf"^TestFailsOnDigits raised on {sum(failing)} of {len(wiki)} "
                                                     r"sentences \(more than 1%\), e.g. RuntimeError: digits; "):
            augment.build_cache(wiki, ["TestFailsOnDigits"], tmp_path / "c", progress=False)
        assert not json.loads((tmp_path / "c" / "manifest.json").read_text())["complete"]
        ds = augment.build_cache(wiki, ["TestFailsOnDigits"], tmp_path / "c", progress=False, allow_errors=True)
    finally:
        del augment.REGISTRY["TestFailsOnDigits"]
    stats = load_stats(tmp_path / "c")["TestFailsOnDigits"]
    assert stats["errors"] == sum(failing) > 0
    assert "digits" in stats["error_examples"][0][1]
    assert [o == s for o, s in zip(ds["TestFailsOnDigits"], wiki)] == failing


def test_parallel_build_equals_serial(tmp_path, wiki):
    a = augment.build_cache(wiki, NAMES, tmp_path / "a", shard_size=8, progress=False)
    b = augment.build_cache(wiki, NAMES, tmp_path / "b", shard_size=8, n_process=2, progress=False)
    assert a.to_dict() == b.to_dict()


def test_edit_size():
    assert edit_size("a b c d", "a b c d") == 0
    assert edit_size("a b c d", "a c b d") == 2
    assert edit_size("a b c", "a x b c") == 1


# --------------------------------------------------------------------------- CLI

def test_cli_list_and_preview(capsys):
    from augcse.commands.main import main

    assert main(["augment", "--list"]) == 0
    listing = capsys.readouterr().out
    for name, cls in augment.REGISTRY.items():
        assert name in listing
    assert "all-rule-based:" in listing and "8-aug:" in listing
    assert main(["augment", "--preview", "He travelled widely in Europe."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(augment.REGISTRY)
    assert any(line.startswith("Negation") and "He did not travel widely in Europe." in line for line in lines)
    assert any(line.startswith("Casual2Formal") and "needs model" in line for line in lines)


def test_cli_builds_a_cache(tmp_path, data_dir, capsys):
    from augcse.commands.main import main

    corpus = data_dir / "corpus/wiki1m_for_simcse.first11914.txt"
    out = tmp_path / "cache"
    rc = main(["augment", "--corpus", str(corpus), "--limit", "12", "--augs", "sda,SwitchCase", "--out", str(out),
               "--param", "SwitchCase.p=0.5", "--param", "SwitchCase.variant=v1"])
    assert rc == 0
    assert "| PunctuationInsertion |" in capsys.readouterr().out
    ds = augment.load_cache(out)
    assert len(ds) == 12 and "SwitchCase__changed" in ds.column_names
    assert json.loads((out / "manifest.json").read_text())["params"] == {"SwitchCase": {"p": 0.5, "variant": "v1"}}


# --------------------------------------------------------------------------- quality signals

def test_similarity_and_pll(tiny_st, tiny_mlm_dir):
    from augcse.text.augment import quality

    sims = quality.similarity(["He travelled widely in Europe.", "A cat."],
                              ["He travelled widely in Europe.", "Stock markets fell sharply."], tiny_st)
    assert sims[0] == pytest.approx(1.0, abs=1e-5) and sims[1] < 0.999
    pll = quality.pseudo_log_likelihood(["He travelled widely in Europe.", "Europe in widely travelled he."],
                                        str(tiny_mlm_dir))
    assert all(p < 0 for p in pll) and pll[0] != pll[1]
    rows = quality.quality_table(["He travelled widely in Europe."],
                                 {"Negation": ["He did not travel widely in Europe."],
                                  "Identity": ["He travelled widely in Europe."]}, tiny_st, lm=str(tiny_mlm_dir))
    assert rows[0]["pairs"] == 1 and "pll_diff" in rows[0] and rows[1]["pairs"] == 0
    assert "| Negation | 1 |" in quality.format_quality(rows)


def test_causal_ll_with_tiny_gpt2(tmp_path, minilm_path):
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from augcse.text.augment import quality

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(minilm_path)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=tok.vocab_size, n_embd=16, n_layer=1, n_head=2)).eval()
    scores = quality.causal_log_likelihood(["He travelled widely in Europe."], "unused", model=(tok, model))
    assert scores[0] < 0
