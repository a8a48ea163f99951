"""Trust boundaries: a model folder someone else made never runs its code in augcse, whatever loads it.

Every crafted folder below carries a harmless payload that writes a marker file when its code runs. The matrix
crosses each way augcse loads a model (``load_model``, with and without a pooler; ``augcse encode``; ``augcse eval``)
with each crafted folder, and asserts that the marker never appears and that a refusal is one line naming the
type or file. The crafted folders start from a PromptBERT model saved by augcse (the kind of folder augcse once
loaded with ``trust_remote_code``) and from a plain sentence-transformers folder.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from augcse.commands.main import main
from augcse.models.load import load_model


def payload(marker: Path, base: str) -> str:
    """Module source that writes ``marker`` when imported, and defines a class of every name a loader may ask."""
    return (f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
            f"from transformers import {base}\n"
            + "".join(f"class {name}({base}):\n    pass\n" for name in ("EvilConfig", "EvilModel", "EvilTokenizer")))


def module_with_payload(folder: Path, marker: Path, base: str = "BertConfig") -> str:
    """Write a uniquely named payload module into ``folder``; returns its module name (no cache can hide a run)."""
    name = f"evil_{uuid.uuid4().hex[:10]}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(payload(marker, base))
    return name


def edit_json(path: Path, change: Callable[[dict | list], object]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# --------------------------------------------------------------------------- the crafted folders

def auto_map_config(model: Path, marker: Path, elsewhere: Path) -> None:
    """config.json's auto_map names a config class in another folder (``folder--module.Class``)."""
    name = module_with_payload(elsewhere, marker)
    edit_json(model / "config.json", lambda c: c.update(auto_map={"AutoConfig": f"{elsewhere}--{name}.EvilConfig"}))


def auto_map_in_folder(model: Path, marker: Path, elsewhere: Path) -> None:
    """config.json's auto_map names a model class of a file inside the folder itself."""
    name = module_with_payload(model, marker, "BertModel")
    edit_json(model / "config.json", lambda c: c.update(auto_map={"AutoConfig": f"{name}.EvilConfig",
                                                                   "AutoModel": f"{name}.EvilModel"}))


def auto_map_tokenizer(model: Path, marker: Path, elsewhere: Path) -> None:
    """tokenizer_config.json's auto_map names a tokenizer class in another folder."""
    name = module_with_payload(elsewhere, marker, "BertTokenizerFast")
    edit_json(model / "tokenizer_config.json",
              lambda c: c.update(auto_map={"AutoTokenizer": [None, f"{elsewhere}--{name}.EvilTokenizer"]}))


def auto_map_hub(model: Path, marker: Path, elsewhere: Path) -> None:
    """auto_map names a Hub repository's file (online it would be downloaded and run)."""
    edit_json(model / "config.json",
              lambda c: c.update(auto_map={"AutoConfig": "some-user/some-repo--evil.EvilConfig"}))


def foreign_module_type(model: Path, marker: Path, elsewhere: Path) -> None:
    """modules.json names a module class of a file shipped in the folder."""
    name = module_with_payload(model, marker)
    edit_json(model / "modules.json", lambda m: m.append({"idx": len(m), "name": "x", "path": "", "type":
                                                          f"{name}.EvilModel"}))


def symlinked_code(model: Path, marker: Path, elsewhere: Path) -> None:
    """The code sits in a symlinked subfolder (a search for ``*.py`` does not follow it)."""
    name = module_with_payload(elsewhere / "code", marker)
    (model / "sub").symlink_to(elsewhere / "code", target_is_directory=True)
    edit_json(model / "modules.json", lambda m: m.append({"idx": len(m), "name": "x", "path": "sub", "type":
                                                          f"{name}.EvilModel"}))


def router_with_pickle(model: Path, marker: Path, elsewhere: Path) -> None:
    """A sentence-transformers Router whose sub-module 'type' is a pickle loader, its file a pickle payload."""
    import pickle

    class Payload:
        def __reduce__(self):
            return (Path(marker).write_text, ("ran",))

    route = model / "router"
    (route / "p").mkdir(parents=True)
    (route / "p" / "model.pkl").write_bytes(pickle.dumps(Payload()))
    (route / "router_config.json").write_text(json.dumps({
        "types": {"p": "sentence_transformers.base.model.pickle"}, "structure": {"query": ["p"]},
        "parameters": {"default_route": "query"}}))
    edit_json(model / "modules.json", lambda m: m.append({"idx": len(m), "name": "r", "path": "router", "type":
                                                          "sentence_transformers.base.modules.router.Router"}))


def router_with_code(model: Path, marker: Path, elsewhere: Path) -> None:
    """A Router whose sub-module is a class of a file in the folder."""
    name = module_with_payload(model / "router", marker)
    (model / "router" / "router_config.json").write_text(json.dumps({
        "types": {"e": f"{name}.EvilModel"}, "structure": {"query": ["e"]}, "parameters": {}}))
    edit_json(model / "modules.json", lambda m: m.append({"idx": len(m), "name": "r", "path": "router", "type":
                                                          "sentence_transformers.base.modules.router.Router"}))


def module_path_outside(model: Path, marker: Path, elsewhere: Path) -> None:
    """A Router whose module path climbs out of the folder."""
    edit_json(model / "modules.json", lambda m: m.append({"idx": len(m), "name": "r", "path": "../" + elsewhere.name,
                                                          "type": "sentence_transformers.base.modules.router.Router"}))


CRAFTED = [auto_map_config, auto_map_in_folder, auto_map_tokenizer, auto_map_hub, foreign_module_type,
           symlinked_code, router_with_pickle, router_with_code, module_path_outside]


# --------------------------------------------------------------------------- the loaders

def by_load_model(folder: Path, tmp: Path) -> None:
    load_model(str(folder)).encode(["A sentence."])


def by_load_model_with_pooler(folder: Path, tmp: Path) -> None:
    load_model(str(folder), pooler="avg").encode(["A sentence."])


def by_encode(folder: Path, tmp: Path) -> int:
    (tmp / "in.txt").write_text("A sentence.\n")
    return main(["encode", str(folder), str(tmp / "in.txt"), "--out", str(tmp / "e.npy")])


def by_eval(folder: Path, tmp: Path) -> int:
    return main(["eval", str(folder), "--tasks", "STSBenchmark-dev-original", "--json"])


def by_training_backbone(folder: Path, tmp: Path) -> None:
    """A recipe's ``model.backbone``, as published (no pooler) and rebuilt with one."""
    from augcse.training.recipes.config import load_recipe
    from augcse.training.build import build_model

    for pooler in ("null", "avg"):
        build_model(load_recipe(None, "quickstart", [f"model.backbone={folder}", f"model.pooler={pooler}"]))


LOADERS = [by_load_model, by_load_model_with_pooler, by_encode, by_eval, by_training_backbone]


@pytest.fixture(scope="module")
def prompt_folder(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PromptBERT model saved as augcse saves a run's final model (portable: its module file beside it)."""
    from conftest import build_tiny_bert

    from augcse.models.module_types import make_portable
    from augcse.models.prompt import prompt_model

    root = tmp_path_factory.mktemp("prompt")
    model = prompt_model(str(build_tiny_bert(minilm_path, root / "tiny")))
    model.save(str(root / "final"))
    make_portable(root / "final")
    return root / "final"


@pytest.fixture(scope="module")
def plain_folder(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentence-transformers folder of sentence-transformers modules only (Transformer, Pooling)."""
    from conftest import build_tiny_bert
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    root = tmp_path_factory.mktemp("plain")
    transformer = Transformer(str(build_tiny_bert(minilm_path, root / "tiny")), max_seq_length=32)
    SentenceTransformer(modules=[transformer, Pooling(32, "mean")]).save(str(root / "final"))
    return root / "final"


def _outcome(loader, folder: Path, tmp: Path, capsys: pytest.CaptureFixture) -> str | None:
    """None when it loaded; the refusal's text otherwise (a CLI's stderr, or the error's message)."""
    from augcse.assets.resolve import AssetError

    try:
        code = loader(folder, tmp)
    except (ValueError, AssetError) as exc:
        return str(exc)
    err = capsys.readouterr().err.strip()
    if code not in (None, 0):
        assert code == 2, f"{loader.__name__}: exit {code}: {err}"
        return err
    return None


@pytest.mark.parametrize("base", ["prompt", "plain"])
@pytest.mark.parametrize("craft", CRAFTED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("loader", LOADERS, ids=lambda f: f.__name__)
def test_a_crafted_folder_never_runs_its_code(loader, craft, base: str, prompt_folder: Path, plain_folder: Path,
                                               tmp_path: Path, capsys: pytest.CaptureFixture, data_dir: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(prompt_folder if base == "prompt" else plain_folder, folder)
    for stray in folder.glob("*.py"):  # the shipped module file is augcse's own, but may not be what runs
        stray.write_text(payload(tmp_path / "marker", "BertConfig") + stray.read_text())
    marker, elsewhere = tmp_path / "marker", tmp_path / "elsewhere"
    elsewhere.mkdir()
    craft(folder, marker, elsewhere)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p != tmp_path / "e.npy")
    refusal = _outcome(loader, folder, tmp_path, capsys)
    assert not marker.exists(), f"{craft.__name__} ran its code through {loader.__name__}"
    if refusal is not None:
        assert len(refusal.splitlines()) == 1, refusal
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")
                   if p != tmp_path / "e.npy" and p.name != "in.txt" and "__pycache__" not in p.parts)
    assert after == [p for p in before if "__pycache__" not in p.parts], "the load changed files"


@pytest.mark.parametrize("craft", [foreign_module_type, router_with_code, router_with_pickle, symlinked_code,
                                   module_path_outside], ids=lambda f: f.__name__)
def test_a_folder_that_needs_foreign_code_is_refused_naming_it(craft, plain_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(plain_folder, folder)
    (tmp_path / "elsewhere").mkdir()
    craft(folder, tmp_path / "marker", tmp_path / "elsewhere")
    with pytest.raises(ValueError) as caught:
        load_model(str(folder))
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert ("module type" in message or "module path" in message) and "never runs" in message or "outside" in message


def test_promptbert_loads_in_plain_sentence_transformers_without_augcse(prompt_folder: Path, tmp_path: Path) -> None:
    """The saved folder carries its module: a Python without augcse on its path loads it with
    trust_remote_code=True and encodes as augcse does; augcse itself never imports that file."""
    import subprocess
    import sys

    import numpy as np

    sentences = ["A man plays a guitar.", "Nobody is here."]
    expected = load_model(str(prompt_folder)).encode(sentences)
    assert "augcse" not in (prompt_folder / "prompt_transformer.py").read_text().split('"""', 2)[2].split(
        "class PromptTransformer")[0].replace("augcse.models.load", ""), "the shipped module imports augcse"
    # -S: no site processing, so no .pth file and no editable-install finder; the packages are put on the path
    # by hand, as they are for a user who installed sentence-transformers and not augcse
    script = (
        "import sys\n"
        f"sys.path += {[p for p in sys.path if p.endswith('site-packages')]!r}\n"
        "import importlib.util\n"
        "assert importlib.util.find_spec('augcse') is None, 'augcse is importable'\n"
        "import numpy\n"
        "from sentence_transformers import SentenceTransformer\n"
        f"model = SentenceTransformer({str(prompt_folder)!r}, trust_remote_code=True)\n"
        "assert 'augcse' not in type(model[0]).__module__, type(model[0]).__module__\n"
        f"numpy.save({str(tmp_path / 'plain.npy')!r}, model.encode({sentences!r}))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    env["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    done = subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert np.allclose(np.load(tmp_path / "plain.npy"), expected, atol=1e-6)


def test_augcse_never_imports_the_shipped_file(prompt_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(prompt_folder, folder)
    shipped = folder / "prompt_transformer.py"
    shipped.write_text(payload(tmp_path / "marker", "BertConfig") + shipped.read_text())
    load_model(str(folder)).encode(["A sentence."])
    assert not (tmp_path / "marker").exists()
    assert json.loads((folder / "modules.json").read_text())[0]["type"] == "prompt_transformer.PromptTransformer"
