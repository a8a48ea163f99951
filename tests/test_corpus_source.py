"""One answer to "where is this corpus, and how do I get it": training, reproduce and studies agree."""

from __future__ import annotations

import pytest

from augcse.commands.main import main
from augcse.text.corpus_source import find_corpus, how_to_get


def test_a_corpus_is_a_path_or_a_data_directory_file(tmp_path):
    named = tmp_path / "mine.txt"
    named.write_text("a sentence\n")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "in-dir.txt").write_text("another\n")
    assert find_corpus(str(named), None) == named
    assert find_corpus("corpus/in-dir.txt", tmp_path) == tmp_path / "corpus" / "in-dir.txt"
    assert find_corpus("corpus/absent.txt", tmp_path) is None


@pytest.mark.parametrize(("corpus", "advice"), [
    ("corpus/wiki1m_for_simcse.txt", "`augcse download corpus --data-dir {root}` fetches it"),
    ("corpus/sts_sick_unlabelled.txt",
     "`python -m augcse.text.sts_corpus --output {root}/corpus/sts_sick_unlabelled.txt` makes it"),
    ("corpus/openwebtext-declutr.txt", "no augcse command fetches or makes it: give the file"),
])
def test_the_advice_names_the_command_that_gets_it(tmp_path, monkeypatch, corpus, advice):
    assert how_to_get(corpus, tmp_path) == advice.format(root=tmp_path)
    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    assert how_to_get(corpus, None) == advice.format(root="DIR")


def test_reproduce_gives_the_same_advice_in_its_plan_and_its_refusal(tmp_path, monkeypatch, capsys):
    """The dry run once promised that ``augcse download corpus`` fetches OpenWebText (it does not), and the
    refusal told ConSERT's users to "give the file" that a command makes."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "augcse", "--dry-run", "--rows", "declutr-roberta-base", "--seeds", "1",
                 "--data-dir", str(tmp_path)]) == 0
    assert "corpus/openwebtext-declutr.txt NOT HERE (no augcse command fetches or makes it" in capsys.readouterr().out
    assert main(["reproduce", "sda", "--rows", "consert-bert-base", "--seeds", "1", "--data-dir", str(tmp_path)]) == 2
    assert (f"`python -m augcse.text.sts_corpus --output {tmp_path}/corpus/sts_sick_unlabelled.txt` makes it"
            in capsys.readouterr().err)
