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


# what a path may be where a folder is expected, and the words that say so
NOT_FOLDERS = {"a file": (lambda t: _a_file(t), "is a file, not a folder"),
               "a character device": (lambda t: "/dev/zero", "is a character device, not a folder")}
# every reader that expects a folder, and how to hand it the path
FOLDER_READERS = {
    "eval --data-dir": lambda path, model, t: ["eval", model, "--tasks", "STSBenchmark-dev-original", "--data-dir", path],
    "assets --data-dir": lambda path, model, t: ["assets", "--data-dir", path],
    "eval MODEL": lambda path, model, t: ["eval", path, "--tasks", "STSBenchmark-dev-original"],
    "encode MODEL": lambda path, model, t: ["encode", path, str(_texts(t)), "--out", str(t / "e.npy")],
}


def _a_file(tmp_path) -> str:
    (tmp_path / "afile").write_text("x\n")
    return str(tmp_path / "afile")


def _texts(tmp_path):
    (tmp_path / "texts.txt").write_text("one sentence\n")
    return tmp_path / "texts.txt"


@pytest.mark.parametrize("kind", list(NOT_FOLDERS))
@pytest.mark.parametrize("reader", list(FOLDER_READERS))
def test_a_path_that_is_not_a_folder_is_named_for_what_it_is(reader, kind, tmp_path, tiny_model_dir, capsys):
    make, said = NOT_FOLDERS[kind]
    path = make(tmp_path)
    assert main(FOLDER_READERS[reader](path, str(tiny_model_dir), tmp_path)) == 2
    line = one_line(capsys)
    assert path in line and said in line and "does not exist" not in line, line


@pytest.mark.parametrize("path, said", [("/dev/zero", "is a character device"), (None, "is a folder")])
def test_encode_names_what_its_input_is_when_it_is_not_a_file(path, said, tmp_path, capsys):
    path = path or str(tmp_path)
    assert main(["encode", "some-model", path, "--out", str(tmp_path / "e.npy")]) == 2
    line = one_line(capsys)
    assert path in line and said in line and "no such file" not in line, line


# text that is not UTF-8 and that no single-byte --encoding reads, and what the line must call it
WIDE = {"utf-16": "UTF-16", "utf-16-le": "UTF-16", "utf-16-be": "UTF-16", "utf-32": "UTF-32"}


@pytest.mark.parametrize("encoding", list(WIDE))
def test_encode_calls_a_utf16_file_utf16_and_never_advises_latin1(encoding, tmp_path, capsys, monkeypatch):
    import augcse.commands.encode

    monkeypatch.setattr(augcse.commands.encode, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    texts = tmp_path / "texts.txt"
    texts.write_bytes("Le café est fermé.\nZwei Sätze.\n".encode(encoding))
    assert main(["encode", "some-model", str(texts), "--out", str(tmp_path / "e.npy")]) == 2
    line = one_line(capsys)
    assert WIDE[encoding] in line and "iconv" in line and "latin-1" not in line, line


def test_a_plain_latin1_file_still_gets_the_encoding_advice(tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_bytes("Le café\n".encode("latin-1"))
    assert main(["encode", "some-model", str(texts), "--out", str(tmp_path / "e.npy")]) == 2
    assert "--encoding latin-1" in one_line(capsys)


def _losses_with_temperature() -> list[str]:
    from augcse.core.loss_parameters import LOSS_PARAMETERS

    return [name for name, section in LOSS_PARAMETERS.items() if section and "temperature" in section.model_fields]


@pytest.mark.parametrize("temperature", ["1e-300", "1e-6"])
@pytest.mark.parametrize("loss", _losses_with_temperature())
def test_an_implausible_temperature_is_refused_by_name_before_training(loss, temperature, tmp_path, tiny_model_dir,
                                                                       capsys):
    assert main(["train", "--recipe", "quickstart", f"loss.name={loss}", "loss.params={}",
                 f"loss.params.temperature={temperature}", f"output_dir={tmp_path}", f"model.backbone={tiny_model_dir}",
                 "training.max_steps=1"]) == 2
    line = one_line(capsys)
    assert "'loss.params.temperature' must be at least 0.0001" in line and "learning rate" not in line, line


def test_the_papers_temperatures_are_accepted():
    from augcse.core.loss_parameters import loss_settings

    for loss in _losses_with_temperature():
        for temperature in (1e-4, 0.01, 0.05, 0.1):
            assert loss_settings(loss, {"temperature": temperature})["temperature"] == temperature


def _wordnet_augmentations() -> list[str]:
    from augcse.text.augment.base import REGISTRY

    return [name for name, cls in REGISTRY.items() if "wordnet" in cls.needs]


@pytest.mark.parametrize("name", _wordnet_augmentations())
def test_preview_says_an_augmentation_is_unavailable_without_wordnet(name, capsys, monkeypatch):
    """A sentence with no common noun or adjective: the rule never reaches WordNet, and once showed "unchanged"."""
    import augcse.assets.resolve as resolve

    def missing():
        raise resolve.AssetError("WordNet not found on NLTK's data path; run `python -m nltk.downloader wordnet`")

    monkeypatch.setattr(resolve, "wordnet", missing)
    assert main(["augment", "--preview", "He travelled widely in Europe.", "--augs", name]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(name) and "! [unavailable: WordNet not found" in line and "nltk.downloader" in line, line


# (precision of the scores already in the stage, of the scores merged now) -> precision the stage records
PRECISIONS = {("float32", "bf16"): "bf16 for STSBenchmark-dev-original; float32 for STS12",
              ("bf16", "float32"): "bf16 for STS12; float32 for STSBenchmark-dev-original",
              ("float32", "float32"): "float32", ("bf16", "bf16"): "bf16"}


@pytest.mark.parametrize("earlier, now", list(PRECISIONS))
def test_each_score_keeps_the_precision_it_was_computed_in(earlier, now, tmp_path):
    import json

    from augcse.commands.eval import save_scores
    from augcse.evaluation.tasks import load_builtin_tasks

    load_builtin_tasks()
    versions = {"model": {"named": "m"}, "data": {}}
    (tmp_path / "eval.json").write_text(json.dumps({
        "after": {"STS12": 0.5, "STSBenchmark-dev-original": 0.6},
        "versions": {"after": {**versions, "precision": earlier}}}))
    save_scores(tmp_path, {"STSBenchmark-dev-original": 0.7}, "after", {**versions, "precision": now})
    stage = json.loads((tmp_path / "eval.json").read_text())["versions"]["after"]
    assert stage["precision_by_task"] == {"STS12": earlier, "STSBenchmark-dev-original": now}
    assert stage["precision"] == PRECISIONS[earlier, now]


def test_assets_says_what_happens_to_each_missing_on_demand_file(tmp_path, capsys):
    """Training never downloads its corpus (it falls back), evaluation fetches its files: each row says which."""
    from augcse.assets.download import Group, source_for
    from augcse.assets.resolve import KNOWN_DATA

    assert main(["assets", "--data-dir", str(tmp_path)]) == 0
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines() if line.startswith("data ")}
    on_demand = [rel for rel in KNOWN_DATA if (s := source_for(rel)) is not None and s.on_demand
                 and "not local" in rows[rel]]
    assert "corpus/wiki1m_for_simcse.txt" in on_demand
    for rel in on_demand:
        said = ("training never downloads it and uses the recipe's data.fallback instead; `augcse download corpus` "
                "fetches it" if source_for(rel).group is Group.CORPUS else "evaluation downloads it on first use")
        assert said in rows[rel], rows[rel]
