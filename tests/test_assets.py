"""Asset resolution order and the download path (tested with a local file:// URL, never the network)."""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from augcse.assets import download, resolve as assets


def test_packaged_model_and_explicit_folder(minilm_path, tiny_model_dir):
    assert assets.resolve_model("sentence-transformers/all-MiniLM-L6-v2") == str(minilm_path)
    assert assets.resolve_model(str(tiny_model_dir)) == str(tiny_model_dir)
    assert assets.describe_model("sentence-transformers/all-MiniLM-L6-v2").startswith("packaged copy")


def test_data_dir_then_embedded_then_download(tmp_path, monkeypatch, data_dir):
    monkeypatch.setenv("AUGCSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    rel = "sts/original/STSBenchmark/stsbenchmark/sts-dev.csv"
    assert assets.resolve_data(rel, data_dir) == data_dir / rel
    embedded = assets.resolve_data(rel)  # no data directory: the copy shipped in the package
    assert embedded.read_bytes() == (data_dir / rel).read_bytes()

    archive = tmp_path / "release.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("inner/file.txt", "hello\n")
    _serve(monkeypatch, archive, hashlib.sha256(b"hello\n").hexdigest())
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    got = assets.resolve_data("x/file.txt")
    assert got.read_text() == "hello\n" and str(got).startswith(str(tmp_path / "cache"))


def _serve(monkeypatch, archive, sha256: str) -> None:
    """An on-demand source (a local file:// zip) installing ``x/file.txt``, with ``sha256`` recorded for it."""
    source = download.Source("test", download.Group.CORPUS, "test", {"zip": archive.as_uri()},
                             (download.Member("x/file.txt", ("zip:inner/file.txt",)),), on_demand=True)
    monkeypatch.setattr(download, "sources", lambda: (source,))
    monkeypatch.setattr(download, "checksums", lambda: {"x/file.txt": sha256})


def test_on_demand_download_with_a_wrong_checksum_installs_nothing(tmp_path, monkeypatch):
    """The one downloader verifies on-demand files too: a mismatch is refused and leaves nothing behind."""
    monkeypatch.setenv("AUGCSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    archive = tmp_path / "release.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("inner/file.txt", "tampered\n")
    _serve(monkeypatch, archive, hashlib.sha256(b"hello\n").hexdigest())
    with pytest.raises(assets.AssetError, match="differ from the recorded sha256") as err:
        assets.resolve_data("x/file.txt")
    assert "\n" not in str(err.value)
    downloads = tmp_path / "cache" / "downloads"
    assert not (downloads / "x").exists()  # nothing installed
    assert [p.name for p in downloads.rglob("*") if p.is_file()] == []  # no archive or part kept as if complete


def test_bad_data_dir_is_one_clear_line(tmp_path):
    with pytest.raises(assets.AssetError, match="does not exist; fix --data-dir"):
        assets.resolve_data("corpus/x.txt", tmp_path / "nowhere")


def test_embedded_default_is_small_and_real():
    sizes = sum(p.stat().st_size for p in assets.EMBEDDED_DIR.iterdir())
    assert sizes < 5 * 1024 * 1024
    corpus = assets.resolve_data("corpus/wiki_default.txt").read_text().splitlines()
    assert 10_000 <= len(corpus) <= 20_000 and corpus[0].startswith("YMCA in South Australia")


def test_assets_command_lists_everything(capsys, data_dir):
    from augcse.commands.main import main

    assert main(["assets", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "packaged copy" in out and "embedded wiki_default.txt.gz" in out and "transfer" in out


def test_assets_finds_wordnet_in_the_data_directory_as_the_augmentations_do(data_dir, tmp_path):
    """Without NLTK_DATA, `augcse assets --data-dir DIR` and the augmentations both read DIR/nltk_data."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("NLTK_DATA", "AUGCSE_DATA")}
    env["HOME"] = str(tmp_path)  # no ~/nltk_data
    code = ("import sys; from augcse.assets.resolve import asset_table; "
            "print([r[2] for r in asset_table(sys.argv[1]) if r[0] == 'wordnet'][0]); "
            "print([r[2] for r in asset_table(None) if r[0] == 'wordnet'][0])")
    out = subprocess.run([sys.executable, "-c", code, str(data_dir)], env=env, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == f"NLTK data: {data_dir / 'nltk_data' / 'corpora' / 'wordnet.zip'}"
