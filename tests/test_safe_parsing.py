"""Every file augcse reads from someone else is parsed safely: YAML aliases that expand without bound (or refer to
themselves) are refused in one line wherever YAML is read, a pickle in a checkpoint's loss state never runs (even
with torch's ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``), and a damaged run record is one line in report and compare."""

from __future__ import annotations

import io
import pickle
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from augcse.commands.main import main
from augcse.core import yamlfile
from conftest import tiny_cls_recipe
from test_checkpoint_check import moved_recipe, stopped_run  # noqa: F401 - the fixture: a run stopped after two checkpoints


def bomb(levels: int = 9) -> str:
    """A "billion laughs" of ``levels`` nine-fold aliases: under a kilobyte, 9**levels values expanded."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def flow_bomb() -> str:
    inner = ", ".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9))
    return "{l0: &l0 [x, x, x, x, x, x, x, x, x], " + inner + "}"


def test_an_alias_bomb_and_a_recursive_alias_are_refused_in_one_line() -> None:
    assert len(bomb()) < 1024
    for text in (bomb(), "a: &a [1, *a]\n"):
        with pytest.raises(yamlfile.AliasBombError) as caught:
            yamlfile.load(text)
        assert len(str(caught.value).splitlines()) == 1 and str(caught.value).startswith("line ")


def test_shared_blocks_still_load() -> None:
    text = "base: &b {lr: 1.0e-5, steps: 8}\none: {<<: *b, steps: 16}\ntwo: *b\n"
    assert yamlfile.load(text)["one"] == {"lr": 1e-5, "steps": 16}


def long_string_bomb(aliases: int = 99_000) -> str:
    """One 64 KiB string repeated through ``aliases`` aliases: few values, 6.5 GB of text once written out."""
    return f"s: &s {'x' * 65_536}\nl: [{', '.join(['*s'] * aliases)}]\n"


def deep(levels: int = 600) -> str:
    return "a: " + "[" * levels + "]" * levels + "\n"


# each document as a block (files) and as one flow line (overrides), and the words its one line must hold
DOCUMENTS = {
    "billion laughs": (bomb(), flow_bomb(), "alias"),
    "long string": (long_string_bomb(), "{" + long_string_bomb().strip().replace("\n", ", ") + "}", "characters"),
    "600 deep": (deep(), "[" * 600 + "]" * 600, "nested more than"),
}


def _indented(text: str, indent: str) -> str:
    return "".join(f"{indent}{line}\n" for line in text.splitlines())


def _recipe_with(tmp_path: Path, text: str) -> Path:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\ntraining:\n  lr_scheduler_kwargs:\n" + _indented(text, "    "))
    return recipe


def _grid_with(tmp_path: Path, text: str) -> Path:
    grid = tmp_path / "g.yaml"
    grid.write_text("seeds: [1]\nrecipe: quickstart\ntasks: STSBenchmark\nrows: {a: {}}\nextra:\n" + _indented(text, "  "))
    return grid


def _run_with(tmp_path: Path, text: str) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "recipe.yaml").write_text(text)
    return run


# every command that reads YAML a user may have been handed, and how to hand it a document (block, flow)
COMMANDS = {
    "train recipe": lambda t, block, flow: ["train", str(_recipe_with(t, block))],
    "train override": lambda t, block, flow: ["train", "--recipe", "quickstart", f"training.lr_scheduler_kwargs={flow}"],
    "study grid": lambda t, block, flow: ["study", str(_grid_with(t, block)), "--output", str(t / "out")],
    "report run": lambda t, block, flow: ["report", str(_run_with(t, block))],
    "compare runs": lambda t, block, flow: ["compare", str(_run_with(t, block)), str(_run_with(t / "b", block))],
}

CAPPED = """
import contextlib, io, json, os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
{prelude}
from augcse.commands.main import main
if {fork}:
    import torch  # before the first fork, so that every case starts from the same process


def case(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return [code, err.getvalue().strip().splitlines()]


def forked(argv):
    # the case alone in a fork of this process: its own peak resident memory, read with wait4 for it alone
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        with os.fdopen(write, "w") as pipe:
            pipe.write(json.dumps(case(argv)))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = json.loads(pipe.read() or "[null, []]")
    _, status, usage = os.wait4(pid, 0)
    return said + [usage.ru_maxrss, os.waitstatus_to_exitcode(status)]


out = {{}}
for name, argv in json.loads(open(sys.argv[1]).read()).items():
    if {fork}:
        out[name] = forked(argv)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out[name] = case(argv) + [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak]
print(json.dumps(out))
"""


def run_capped(commands: dict[str, list[str]], folder: Path, limit: int = 1 << 30, timeout: int = 120,
               prelude: str = "", fork: bool = False) -> dict:
    """``{name: [exit code, stderr lines, KiB]}`` of ``main(argv)`` for each command, run in one child process
    (after ``prelude``) whose address space is capped at ``limit`` bytes: a regression fails here, it does not take
    the machine's memory. KiB is what the child's peak resident memory grew by during the command; with ``fork``
    each command runs alone in a fork of that child, and KiB is that fork's own peak (followed by its exit code)."""
    import json
    import subprocess
    import sys

    import threading

    (folder / "commands.json").write_text(json.dumps(commands))
    out, err = folder / "capped.out", folder / "capped.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        child = subprocess.Popen([sys.executable, "-c", CAPPED.format(limit=limit, prelude=prelude, fork=fork),
                                  str(folder / "commands.json")], stdout=stdout, stderr=stderr, cwd=folder)
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        code = child.wait()
        timer.cancel()
    assert code == 0, err.read_text()[-2000:]
    return json.loads(out.read_text().strip().splitlines()[-1])


def test_the_documents_are_what_they_claim() -> None:
    assert len(bomb()) < 1024 and len(long_string_bomb()) < 500_000

    def walk(node: list) -> int:
        return 1 + sum(walk(child) for child in node)

    with pytest.raises(RecursionError):  # what a recursive walk of the deep one does
        walk(yaml.load(deep(), Loader=yaml.CSafeLoader)["a"])


def test_every_command_refuses_every_unbounded_document_in_one_line(tmp_path: Path) -> None:
    """Documents × commands, all in one child capped at 1 GiB, in seconds."""
    import time

    commands = {}
    for document, (block, flow, _) in DOCUMENTS.items():
        for name, make in COMMANDS.items():
            folder = tmp_path / document.replace(" ", "-") / name.replace(" ", "-")
            (folder / "b").mkdir(parents=True)
            commands[f"{document} / {name}"] = make(folder, block, flow)
    started = time.monotonic()
    results = run_capped(commands, tmp_path)
    assert time.monotonic() - started < 60
    for name, (code, err, _) in results.items():
        said = DOCUMENTS[name.partition(" / ")[0]][2]
        assert code == 2 and len(err) == 1 and said in err[0] and "line " in err[0], (name, code, err)


@pytest.mark.parametrize("text", ["name: [unclosed\n", "a: b: c\n", "\xff\xfe"])
def test_a_damaged_recipe_in_a_run_is_one_line_in_report(text: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_bytes(text.encode("latin-1"))
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "recipe.yaml" in err[0], err


class Payload:
    marker = ""

    def __reduce__(self):
        return (Path(self.marker).write_text, ("ran",))


@pytest.mark.parametrize("force", [False, True])
def test_a_pickle_in_a_loss_state_never_runs(force: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from augcse.training.callbacks import LOSS_STATE, restore_loss_state

    if force:
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    Payload.marker = str(tmp_path / "marker")
    (tmp_path / LOSS_STATE).write_bytes(pickle.dumps({"w": Payload()}))
    with pytest.raises(Exception):
        restore_loss_state(torch.nn.Linear(1, 1), tmp_path)
    assert not (tmp_path / "marker").exists()


def test_every_torch_load_in_augcse_states_weights_only() -> None:
    """The rule read from the source: a new call without it fails here."""
    import ast

    import augcse

    root = Path(augcse.__file__).parent
    calls = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("torch.load", "np.load", "numpy.load"):
                keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
                calls.append((path.name, keywords))
    assert calls
    for name, keywords in calls:
        assert keywords.get("weights_only") == "True" or keywords.get("allow_pickle") == "False", (name, keywords)


# the files a resume reads that a pickle could hide in, and two ways to write one: torch's zip format, a bare pickle
PICKLED_FILES = ("optimizer.pt", "scheduler.pt", "rng_state.pth", "loss_state.pt", "pytorch_model.bin")
PICKLES = {
    "torch.save": lambda path: __import__("torch").save({"state": Payload()}, path),
    "bare pickle": lambda path: path.write_bytes(pickle.dumps({"state": Payload()}, protocol=2)),
}


def _tagged(path: Path) -> None:
    path.write_text(f"name: r\nmodel: !!python/object/apply:pathlib.Path.write_text [{Payload.marker!r}, ran]\n")


# a recipe with a tag: the checkpoint's own, or the run folder's when the checkpoint holds none
TAGGED_RECIPES = {
    "checkpoint recipe": (lambda checkpoint: _tagged(checkpoint / "recipe.yaml"), "recipe.yaml"),
    "run recipe": (lambda checkpoint: ((checkpoint / "recipe.yaml").unlink(missing_ok=True),
                                       _tagged(checkpoint.parent / "recipe.yaml")), "recipe.yaml"),
}


def test_a_pickle_or_a_tag_in_a_checkpoint_is_one_line_on_resume_and_never_runs(stopped_run: Path,
                                                                                 tmp_path: Path) -> None:
    """Every file × every way to write it, each resumed alone in a fork of one child: one line naming the file,
    nothing run, in seconds, each case's peak resident memory under 1 GiB (measured at 517 MiB each, torch
    included; the address space is capped at 3 GiB, since torch maps 2 alone)."""
    import shutil
    import time

    Payload.marker = str(tmp_path / "marker")
    cases = {f"{name} / {how}": (lambda c, name=name, write=write: write(c / name), name)
             for name in PICKLED_FILES for how, write in PICKLES.items()}
    cases.update(TAGGED_RECIPES)
    commands, said = {}, {}
    for case, (spoil, name) in cases.items():
        folder = tmp_path / case.replace(" / ", "-").replace(" ", "-")
        shutil.copytree(stopped_run, folder)
        for checkpoint in (folder / "runs" / "r").glob("checkpoint-*"):
            spoil(checkpoint)
        commands[case] = ["train", str(moved_recipe(folder)), "keep_checkpoints=true", "--resume"]
        said[case] = name
    started = time.monotonic()
    results = run_capped(commands, tmp_path, limit=3 << 30, fork=True)
    assert time.monotonic() - started < 60
    for case, (code, err, peak, exit_code) in results.items():
        assert exit_code == 0 and peak < 1 << 20, (case, exit_code, peak)  # KiB: each case alone under 1 GiB
        assert code == 2 and len(err) == 1 and said[case] in err[0], (case, code, err)
        assert "Traceback" not in err[0] and "weights_only` set to `False`" not in err[0], (case, err)
    assert not Path(Payload.marker).exists()


@pytest.mark.parametrize("command", ["eval", "encode"])
@pytest.mark.parametrize("how", list(PICKLES))
def test_a_pickle_as_a_models_weights_is_one_line_and_never_runs(command: str, how: str, tiny_model_dir: Path,
                                                                tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    Payload.marker = str(tmp_path / "marker")
    for weights in model.rglob("*.safetensors"):
        weights.unlink()
        PICKLES[how](weights.parent / "pytorch_model.bin")
    texts = tmp_path / "texts.txt"
    texts.write_text("a sentence\nanother one\n")
    argv = {"eval": ["eval", str(model), "--tasks", "STSBenchmark-dev-original"],
            "encode": ["encode", str(model), str(texts), "--out", str(tmp_path / "out.npy")]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pytorch_model.bin" in err[0] and ("never runs" in err[0] or "not a plain" in err[0]), err
    assert not Path(Payload.marker).exists()


def _zip_member(archive: zipfile.ZipFile, name: str, kind: str) -> None:
    if kind == "symbolic link":
        info = zipfile.ZipInfo(name)
        info.external_attr = (stat.S_IFLNK | 0o777) << 16  # as zip --symlinks writes it
        archive.writestr(info, "/etc/passwd")
    elif kind == "inflating":
        with archive.open(name, "w") as member:
            for _ in range(64):
                member.write(bytes(1 << 20))
    else:
        archive.writestr(name, "x")


def _tar_member(archive: tarfile.TarFile, name: str, kind: str) -> None:
    info = tarfile.TarInfo(name)
    if kind in ("symbolic link", "hard link"):
        info.type, info.linkname = (tarfile.SYMTYPE if kind == "symbolic link" else tarfile.LNKTYPE), "/etc/passwd"
        archive.addfile(info)
        return
    data = bytes(64 << 20) if kind == "inflating" else b"x"
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


# a zip and a tar source of downloads.yaml: the task that downloads only it, the folder inside whose files it installs
ARCHIVES = {"zip": ("sts12", "STS12-original", "test-gold/"),
            "tar": ("stsbenchmark", "STSBenchmark-original", "stsbenchmark/")}
# what an archive member may be that is never installed, and the words the refusal says
MEMBERS = {"inflating": "inflates past 1 MiB", "symbolic link": "is a symbolic link", "hard link": "is a hard link",
           "named with ..": "named with .."}


def test_a_link_or_an_inflating_member_of_a_download_is_one_line_with_memory_bounded(tmp_path: Path) -> None:
    """Archive kinds × member kinds through ``augcse download --mirror file://…``, all in one child (address space
    capped at 3 GiB: the task registry imports torch) with the member bound lowered to 1 MiB: a 64 MiB member is
    refused as it is written, the peak resident memory grows by under 16 MiB, nothing is installed."""
    from urllib.parse import urlsplit

    from augcse.assets.download import sources

    by_name = {source.name: source for source in sources()}
    commands, said = {}, {}
    for archive_kind, (name, task, folder) in ARCHIVES.items():
        url = next(iter(by_name[name].downloads.values()))
        for kind, words in MEMBERS.items():
            if kind == "hard link" and archive_kind == "zip":
                continue  # zip has no hard links
            case = f"{archive_kind} / {kind}"
            mirror = tmp_path / case.replace(" / ", "-").replace(" ", "-")
            path = mirror / urlsplit(url).netloc / urlsplit(url).path.lstrip("/")
            path.parent.mkdir(parents=True)
            member = folder + ("../evil.txt" if kind == "named with .." else "STS.input.txt")
            if archive_kind == "zip":
                with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                    _zip_member(archive, member, kind)
            else:
                with tarfile.open(path, "w:gz") as archive:
                    _tar_member(archive, member, kind)
            commands[case] = ["download", task, "--mirror", mirror.as_uri(), "--data-dir", str(mirror / "data"),
                              "--retries", "0", "--accept-changed"]  # refused even so
            said[case] = (words, mirror / "data")
    results = run_capped(commands, tmp_path, limit=3 << 30,
                         prelude="import augcse.assets.download as d; d.MAX_MEMBER_BYTES = 1 << 20\n"
                                 "from augcse.commands.download import select_sources\n"
                                 "select_sources(['STS12-original'])  # the task registry's memory, before the peak")
    for case, (code, err, grew) in results.items():
        words, data = said[case]
        assert code == 1 and len(err) == 1 and words in err[0] and "nothing was installed" in err[0], (case, err)
        assert grew < 16 << 10, (case, grew)  # KiB
        assert not [p for p in data.rglob("*") if p.is_file() and ".downloads" not in p.parts], case


def test_the_bound_on_a_whole_source_counts_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files each under the member bound whose sum passes the source bound are refused at the file that crosses."""
    import augcse.assets.download as download

    monkeypatch.setattr(download, "MAX_SOURCE_BYTES", 3 << 20)
    budget = download._Budget()
    for index in range(3):
        budget.take(1 << 20, 1 << 20, f"f{index}")
    with pytest.raises(download.Refused, match="unpack past 3 MiB at f3"):
        budget.take(1, 1, "f3")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_model_dir, data_dir) -> Path:
    """A run of one step with its records and its sentence-transformers model (``final/``)."""
    folder = tmp_path_factory.mktemp("finished")
    recipe = tiny_cls_recipe(folder, tiny_model_dir, data_dir, "r", {"dev": None, "before": None, "after": None},
                             {"max_steps": 1})
    assert main(["train", str(recipe)]) == 0
    return folder / "runs" / "r"


def _half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2)])


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


# what a file someone handed over may be instead of itself
SPOILED = {
    "empty": lambda path: path.write_bytes(b""),
    "garbage": lambda path: path.write_bytes(b"\x80\x04\xff garbage \x00" * 8),
    "cut in half": _half,
    "a folder": _folder,
}

MODEL_FILES = ("final/modules.json", "final/config.json", "final/model.safetensors", "final/tokenizer.json",
               "final/config_sentence_transformers.json", "final/sentence_bert_config.json",
               "final/1_Pooling/config.json")
RUN_FILES = ("recipe.yaml", "log.jsonl", "summary.json", "eval.json")
CHECKPOINT_FILES = tuple(f"runs/r/checkpoint-2/{name}" for name in (
    "trainer_state.json", "optimizer.pt", "scheduler.pt", "rng_state.pth", "loss_state.pt", "model.safetensors",
    "recipe.yaml"))
ADAPT_FAST = ["--budgets", "2", "--alphas", "1", "--held-out", "48", "--clusters", "4", "model.max_seq_length=16",
              "training.per_device_train_batch_size=8"]
# a checkpoint without these files is incomplete, not damaged: the resume takes the one before (a folder in place
# of one is then a fault of the trainer's next save, not of reading)
INCOMPLETE_WITHOUT = ("trainer_state.json", "loss_state.pt")

# each reader: what it is given (a finished run, a stopped one), the files it reads there, how it is run on a copy,
# and whether a damaged file must be refused (a report may read a run that is still writing its log)
READERS = {
    "report": ("finished", RUN_FILES, lambda root, t: ["report", str(root)], False),
    "compare": ("finished", RUN_FILES, lambda root, t: ["compare", str(root), str(root)], False),
    "eval": ("finished", MODEL_FILES, lambda root, t: ["eval", str(root / "final"), "--tasks",
                                                         "STSBenchmark-dev-original"], True),
    "encode": ("finished", MODEL_FILES, lambda root, t: ["encode", str(root / "final"), str(t / "texts.txt"),
                                                           "--out", str(t / "out.npy")], True),
    "adapt": ("finished", MODEL_FILES[:4], lambda root, t: ["adapt", str(t / "texts.txt"),
                                                              f"model.backbone={root / 'final'}", "name=a",
                                                              f"output_dir={t / 'adapted'}", *ADAPT_FAST], True),
    "resume": ("stopped", CHECKPOINT_FILES, lambda root, t: ["train", str(moved_recipe(root)), "keep_checkpoints=true",
                                                               "--resume"], True),
}


@pytest.mark.parametrize("kind", list(SPOILED))
@pytest.mark.parametrize("reader", list(READERS))
def test_every_damaged_file_is_one_line_naming_it(reader: str, kind: str, finished_run: Path, stopped_run: Path,
                                                  tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Readers × ways a file is spoiled, over every file each reader reads: read as it is, or refused in one line
    that names the file (refused always where the reader must not go on)."""
    import shutil

    base, files, argv, must_refuse = READERS[reader]
    (tmp_path / "texts.txt").write_text("".join(f"text number {i} about topic {i % 4}\n" for i in range(64)))
    wrong = []
    for name in files:
        if reader == "resume" and kind == "a folder" and Path(name).name in INCOMPLETE_WITHOUT:
            continue
        root = tmp_path / name.replace("/", "-")
        shutil.copytree(finished_run if base == "finished" else stopped_run, root)
        SPOILED[kind](root / name)
        code = main(argv(root, tmp_path))
        err = [line for line in capsys.readouterr().err.strip().splitlines() if "Loading weights" not in line]
        if (code != 0 or must_refuse) and (code not in (1, 2) or len(err) != 1 or Path(name).name not in err[0]):
            wrong.append((name, code, err[-3:]))
    assert not wrong, wrong
