"""Lines that named the wrong key or the wrong cause now name the key or file and the real cause."""

from __future__ import annotations

import pytest

from augcse.commands.main import main
from conftest import tiny_cls_recipe


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_parameter_carried_over_from_the_recipes_own_loss_says_so(capsys):
    assert main(["train", "--recipe", "quickstart", "loss.name=ct"]) == 2
    line = one_line(capsys)
    assert "'loss.params.temperature' comes from quickstart.yaml, written for loss 'simcse'" in line
    assert "loss.params={}" in line


def test_a_folder_given_as_the_recipe_file_is_called_a_folder(tmp_path, capsys):
    assert main(["train", str(tmp_path)]) == 2
    assert f"recipe file {tmp_path} is a folder" in one_line(capsys)


@pytest.mark.parametrize("command", [["reproduce", "simcse"], ["study", "src/augcse/data/studies/adapt-curves.yaml"]])
def test_a_missing_data_directory_is_refused_even_in_a_dry_run(tmp_path, capsys, command):
    assert main([*command, "--data-dir", str(tmp_path / "nowhere"), "--dry-run"]) == 2
    assert f"data directory '{tmp_path / 'nowhere'}' does not exist" in one_line(capsys)


def test_an_excel_csv_with_a_byte_order_mark_reads_its_first_column(tmp_path, tiny_model_dir, data_dir):
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:40]
    corpus = tmp_path / "excel.csv"
    corpus.write_bytes(b"\xef\xbb\xbf" + ("text\n" + "".join(f'"{line}"\n' for line in lines)).encode())
    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "bom", {"dev": None, "before": None, "after": None},
                             {"max_steps": 1})
    assert main(["train", str(recipe), f"data.corpus={corpus}"]) == 0


def test_ctrl_c_in_the_final_evaluation_prints_a_command_that_works(tmp_path, tiny_model_dir, data_dir, capsys,
                                                                   monkeypatch):
    import shlex

    import augcse.training.run

    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "c", {"dev": None, "before": None,
                                                                      "after": "STSBenchmark-dev-original"},
                             {"max_steps": 2})
    real = augcse.training.run.evaluate

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(augcse.training.run, "evaluate", interrupted)  # Ctrl-C in the "after" evaluation
    assert main(["train", str(recipe), "--overwrite"]) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]  # after the trainer's progress bars
    assert line.startswith("augcse train: interrupted; run the same command again with --auto-resume"), line
    command = shlex.split(line.rpartition(": augcse ")[2])
    assert command == ["train", str(recipe), "--auto-resume"], line
    monkeypatch.setattr(augcse.training.run, "evaluate", real)
    assert main(command) == 0
    assert (tmp_path / "runs" / "c" / "summary.json").is_file()
