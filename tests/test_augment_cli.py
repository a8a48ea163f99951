"""``augcse augment``: bad input refused in one line before anything loads, names found in any case."""

from __future__ import annotations

import subprocess
import sys

import pytest

from augcse.commands.main import main

HEAVY = ("torch", "spacy", "transformers", "datasets", "nltk")


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("He travelled widely in Europe.\nShe does not like apples.\n", encoding="utf-8")
    return path


BAD = [
    (["--param", "RandomSwap.p=lots"], "RandomSwap parameter 'p' must be a number, got 'lots'"),
    (["--param", "RandomSwap.p=1.5"], "RandomSwap parameter 'p' must be <= 1, got 1.5"),
    (["--param", "RandomSwap.aug_max=0"], "RandomSwap parameter 'aug_max' must be > 0, got 0"),
    (["--param", "RandomSwap.aug_max=2.5"], "must be an integer"),
    (["--param", "RandomSwap.q=0.2"], "unknown RandomSwap parameter 'q'; allowed here: p, aug_min, aug_max"),
    (["--param", "RandomSwp.p=0.2"], "did you mean RandomSwap?"),
    (["--param", "SwitchCase.p=0.2"], "not among the selected augmentations"),
    (["--param", "RandomSwap.p"], "expected NAME.KEY=VALUE"),
    (["--augs", "RandomSwap,ContractionExpansions", "--param", "ContractionExpansions.p=0.1"],
     "unknown ContractionExpansions parameter 'p'; allowed here: none"),
    (["--augs", "sda", "--param", "PunctuationInsertion.variant=book"], "PunctuationInsertion parameter 'variant' must be one of 'code', 'paper', got 'book'"),
    (["--augs", "RandomSwop"], "did you mean RandomSwap?"),
    (["--augs", "8-2-agu"], "did you mean 8-2-aug?"),
    (["--augs", ","], "no augmentation named"),
    (["--shard-size", "0"], "--shard-size 0: must be a positive integer"),
    (["--n-process", "0"], "--n-process 0: must be a positive integer"),
    (["--limit", "-5"], "--limit -5: must be a positive integer"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(extra, message, corpus, tmp_path, capsys):
    out = tmp_path / "cache"
    args = ["augment", "--corpus", str(corpus), "--out", str(out), "--augs", "RandomSwap", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err, err
    assert not out.exists()


def test_empty_corpus_is_refused_and_no_manifest_is_written(tmp_path, capsys):
    empty, out = tmp_path / "empty.txt", tmp_path / "cache"
    empty.write_text("\n  \n\n", encoding="utf-8")
    assert main(["augment", "--corpus", str(empty), "--out", str(out), "--augs", "RandomSwap"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no non-empty lines" in err
    assert not (out / "manifest.json").exists()


def test_library_refuses_an_empty_corpus(tmp_path):
    from augcse.text import augment

    with pytest.raises(ValueError, match="empty"):
        augment.build_cache([], ["RandomSwap"], tmp_path / "c", progress=False)
    assert not (tmp_path / "c").exists()


def test_other_inputs_in_out_name_the_overwrite_option(corpus, tmp_path, capsys):
    out = tmp_path / "cache"
    assert main(["augment", "--corpus", str(corpus), "--out", str(out), "--augs", "RandomSwap"]) == 0
    capsys.readouterr()
    assert main(["augment", "--corpus", str(corpus), "--out", str(out), "--augs", "RandomSwap", "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--overwrite" in err and "overwrite=True" not in err and len(err.splitlines()) == 1
    assert main(["augment", "--corpus", str(corpus), "--out", str(out), "--augs", "RandomSwap", "--seed", "1",
                 "--overwrite"]) == 0


def test_names_and_params_are_found_in_any_case(corpus, tmp_path, capsys):
    from augcse.text import augment

    out = tmp_path / "cache"
    assert main(["augment", "--corpus", str(corpus), "--out", str(out), "--augs", "randomswap,SDA",
                 "--param", "randomswap.p=0.5"]) == 0
    ds = augment.load_cache(out)
    assert {"RandomSwap", "PunctuationInsertion", "ModalVerbs", "DoubleNegation"} <= set(ds.column_names)
    assert augment.get("randomSWAP").name == "RandomSwap"
    import json

    assert json.loads((out / "manifest.json").read_text())["params"] == {"RandomSwap": {"p": 0.5}}


def test_help_describes_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["augment", "--help"])
    text = capsys.readouterr().out
    assert "sharded, resumable Arrow cache" in text and "examples:" in text
    import argparse

    from augcse.commands import augment as cli

    parser = argparse.ArgumentParser()
    cli.add_commands(parser.add_subparsers())
    sub = parser._subparsers._group_actions[0].choices["augment"]
    for action in sub._actions:
        assert action.help, f"{action.option_strings} has no help"


def test_augment_cli_module_imports_nothing_heavy():
    code = ("import sys, augcse.commands.augment; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"imported at module level: {out}"
