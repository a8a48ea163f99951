"""``augcse download`` against a local HTTP server on 127.0.0.1 serving the official layouts, rebuilt here
from the data directory: every source, a checksum failure (retried, then a clear error), a resumed download."""

from __future__ import annotations

import csv
import io
import json
import os
import tarfile
import threading
import zipfile
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from augcse.commands.main import main
from augcse.assets.download import checksums, sources


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))[1:]


def _official_inputs(member, data_dir: Path, json_parts: dict) -> dict[str, bytes]:
    """What the official source holds for ``member``: ``{input spec (+ relative path): bytes}``."""
    target = data_dir / member.target
    if member.target.endswith("/"):
        return {member.inputs[0] + str(p.relative_to(target)): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    if member.convert == "copy":
        return {member.inputs[0]: target.read_bytes()}
    rows = _rows(target)
    if member.convert == "label_tab_text":  # the clustering files, CRLF and a trailing format TAB
        return {member.inputs[0]: "".join(f"{label}\t{text}\t\r\n" if "\t" not in text else f"{label}\t{text}\r\n"
                                          for text, label in rows).encode()}
    if member.convert == "seq_label":
        return {member.inputs[0]: "".join(f"{t}\n" for t, _ in rows).encode(),
                member.inputs[1]: "".join(f"{label}\n" for _, label in rows).encode()}
    if member.convert == "json_split":
        json_parts[member.option] = [[t, label] for t, label in rows]
        return {}
    if member.convert == "category_to_label":
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows([["text", "category"], *rows])
        return {member.inputs[0]: buffer.getvalue().encode()}
    raise AssertionError(member.convert)


def _archive(url: str, entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    if url.endswith(".zip"):
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, data in entries.items():
                archive.writestr(name, data)
    else:
        with tarfile.open(fileobj=buffer, mode="w:gz" if url.endswith(".gz") else "w") as archive:
            for name, data in entries.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def mirror_files(data_dir: Path) -> dict[str, bytes]:
    """``{host/path: bytes}`` for every official URL, made from the data directory in the official layouts."""
    entries: dict[str, dict[str, bytes]] = defaultdict(dict)  # url -> {path inside ("" = the file): bytes}
    for source in sources():
        json_parts: dict[str, list] = {}
        for member in source.members:
            if member.target == "corpus/wiki1m_for_simcse.txt":  # not in the data directory: its first lines
                entries[source.downloads["wiki"]][""] = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_bytes()
                continue
            for spec, data in _official_inputs(member, data_dir, json_parts).items():
                key, _, inner = spec.partition(":")
                entries[source.downloads[key]][inner] = data
        if json_parts:
            entries[source.downloads["full"]][""] = json.dumps(json_parts).encode()
    return {urlsplit(url).netloc + urlsplit(url).path: parts[""] if list(parts) == [""] else _archive(url, parts)
            for url, parts in entries.items()}


class Server:
    """A loopback HTTP server with Range support, a request log and scripted faults per path."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.faults: dict[str, list[str]] = defaultdict(list)
        self.log: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.lstrip("/")
                outer.log.append((path, self.headers.get("Range")))
                if path not in outer.files:
                    self.send_error(404)
                    return
                body = outer.files[path]
                fault = outer.faults[path].pop(0) if outer.faults[path] else None
                if fault == "corrupt":  # one character changed, still valid text
                    middle = len(body) // 2
                    body = body[:middle] + (b"#" if body[middle:middle + 1] != b"#" else b"%") + body[middle + 1:]
                start = int(self.headers["Range"][6:].split("-")[0]) if self.headers.get("Range") else 0
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                self.wfile.write(body[start:(start + len(body)) // 2] if fault == "truncate" else body[start:])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server(mirror_files):
    srv = Server(mirror_files)
    yield srv
    srv.close()


def _download(server: Server, target: Path, *what: str) -> int:
    return main(["download", *what, "--data-dir", str(target), "--mirror", server.url])


@pytest.fixture()
def served_wiki1m_recorded(data_dir, monkeypatch):
    """The server holds wiki1m's first lines, not the file whose sha256 is recorded: record the served copy."""
    import hashlib

    from augcse.assets import download

    served = hashlib.sha256((data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_bytes()).hexdigest()
    recorded = {**download.checksums(), "corpus/wiki1m_for_simcse.txt": served}
    monkeypatch.setattr(download, "checksums", lambda: recorded)


def test_every_file_a_source_installs_has_a_recorded_checksum(data_dir):
    """Every single-file target, and every file of the data directory under a folder target, is recorded."""
    recorded = checksums()
    for source in sources():
        for member in source.members:
            if not member.target.endswith("/"):
                assert member.target in recorded, member.target
                continue
            files = [str(p.relative_to(data_dir)) for p in (data_dir / member.target).rglob("*") if p.is_file()]
            assert files and all(f in recorded for f in files), [f for f in files if f not in recorded]
    assert all(url.startswith("https://") or "ixa2.si.ehu.es" in url or "alt.qcri.org" in url
               for source in sources() for url in source.downloads.values())


def test_every_source_lands_in_the_data_directory_layout_verified(server, data_dir, tmp_path, capsys,
                                                                  served_wiki1m_recorded):
    target = tmp_path / "data"
    assert _download(server, target, "all") == 0
    out = capsys.readouterr().out
    recorded = checksums()
    installed = {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file() and ".downloads" not in p.parts}
    produced_and_recorded = installed & set(recorded) - {"corpus/wiki1m_for_simcse.txt"}  # checked below
    assert len(produced_and_recorded) >= 150  # sts/original, SentEval STS12-16, transfer, clustering, intent
    for relpath in produced_and_recorded:
        assert (target / relpath).read_bytes() == (data_dir / relpath).read_bytes(), relpath
    for source in sources():
        assert source.licence in out
    wiki = (target / "corpus/wiki1m_for_simcse.txt").read_bytes()
    assert wiki == (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_bytes()
    assert "0 without a recorded checksum" in out
    assert not [p for p in target.iterdir() if p.name.startswith(".augcse-")]  # no staging folder left behind
    assert all(r is None for _, r in server.log)  # nothing was resumed: every file came whole


def test_a_corrupted_download_is_detected_and_fetched_again(server, tmp_path, capsys):
    path = next(p for p in server.files if p.endswith("/data/agnewsdataraw-8000"))
    server.faults[path] = ["corrupt"]
    assert _download(server, tmp_path / "data", "clustering") == 0
    out = capsys.readouterr().out
    assert "checksum mismatch in clustering/agnews.csv; downloading again (1/2)" in out
    assert [p for p, _ in server.log].count(path) == 2
    assert (tmp_path / "data/clustering/agnews.csv").is_file()


def test_a_download_that_stays_wrong_is_a_clear_error_and_installs_nothing(server, tmp_path, capsys):
    path = next(p for p in server.files if p.endswith("/data/agnewsdataraw-8000"))
    server.faults[path] = ["corrupt"] * 3
    assert _download(server, tmp_path / "data", "clustering") == 1
    err = capsys.readouterr().err
    assert "short-text-clustering: files still differ from the recorded sha256 after 3 downloads" in err
    assert "clustering/agnews.csv" in err and "nothing was installed" in err
    assert not (tmp_path / "data" / "clustering").exists()


def test_a_truncated_download_resumes_with_a_range_request(server, data_dir, tmp_path, capsys):
    path = next(p for p in server.files if p.endswith("senteval.tar"))
    server.faults[path] = ["truncate"]
    assert _download(server, tmp_path / "data", "transfer") == 0
    out = capsys.readouterr().out
    assert "connection ended at" in out and "resuming" in out
    ranges = [r for p, r in server.log if p == path]
    assert ranges[0] is None and ranges[1] == f"bytes={len(server.files[path]) // 2}-"
    mr = "transfer/MR/rt-polarity.pos"
    assert (tmp_path / "data" / mr).read_bytes() == (data_dir / mr).read_bytes()


def test_no_data_directory_is_refused(monkeypatch, capsys):
    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    assert main(["download", "sts"]) == 2
    assert "--data-dir" in capsys.readouterr().err


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_data_directory_that_is_a_file_is_refused_before_any_download(server, tmp_path, capsys):
    target = tmp_path / "data"
    target.write_text("not a folder")
    assert _download(server, target, "clustering") == 2
    assert "--data-dir " + str(target) + " is a file, not a folder" in _one_error_line(capsys)
    assert server.log == []  # refused before any network


def test_an_unwritable_data_directory_is_refused_before_any_download(server, tmp_path, monkeypatch, capsys):
    """A read-only data directory (the write probe fails with EROFS, as on a read-only mount)."""
    import errno
    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    assert _download(server, tmp_path / "data", "clustering") == 2
    line = _one_error_line(capsys)
    assert f"--data-dir {tmp_path / 'data'} cannot be written (Read-only file system)" in line
    assert server.log == []


def test_no_network_is_one_line_saying_what_to_do(tmp_path, capsys):
    """A host that cannot be reached (a closed port on 127.0.0.1): one line, no retries, the fixes named."""
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["download", "clustering", "--data-dir", str(tmp_path / "data"),
                 "--mirror", f"http://127.0.0.1:{port}"]) == 1
    line = _one_error_line(capsys)
    assert f"cannot reach 127.0.0.1:{port}" in line
    assert "check the network connection" in line and "--mirror URL" in line
    assert "attempts" not in line  # an unreachable host is not tried again
    assert not (tmp_path / "data" / "clustering").exists()


def test_a_task_name_downloads_the_sources_its_record_lists(server, data_dir, tmp_path):
    target = tmp_path / "data"
    assert _download(server, target, "STSBenchmark-dev-original", "SICKRelatedness-dev-original") == 0
    fetched = {path.rsplit("/", 1)[-1] for path, _ in server.log}
    assert fetched == {"Stsbenchmark.tar.gz", "sick_train.zip", "sick_trial.zip", "sick_test_annotated.zip"}
    for relpath in ("sts/original/STSBenchmark/stsbenchmark/sts-dev.csv", "sts/original/SICK/SICK_trial.txt"):
        assert (target / relpath).read_bytes() == (data_dir / relpath).read_bytes()


def test_an_unknown_name_is_refused_before_any_download(server, tmp_path, capsys):
    assert _download(server, tmp_path / "data", "STS21") == 2
    line = _one_error_line(capsys)
    assert "unknown task or suite 'STS21'" in line and "did you mean" in line
    assert server.log == [] and not (tmp_path / "data").exists()


def _senteval_with(mirror_files, change) -> Server:
    """A server whose senteval.tar has ``change`` applied to its ``{member name: bytes}``."""
    key = next(p for p in mirror_files if p.endswith("senteval.tar"))
    with tarfile.open(fileobj=io.BytesIO(mirror_files[key])) as archive:
        entries = {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}
    change(entries)
    return Server({**mirror_files, key: _archive(key, entries)})


def test_a_file_whose_copies_differ_between_releases_needs_to_be_accepted(mirror_files, tmp_path, capsys):
    """SentEval's STS-B files depend on the Moses version (downloads.yaml ``may_differ``): a copy unlike the
    recorded one is not fetched again (it is no corruption) but installs only with --accept-changed."""
    changed = {}

    def edit(entries):
        entries["STS/STSBenchmark/sts-dev.csv"] = entries["STS/STSBenchmark/sts-dev.csv"].replace(b" .", b".", 1)
        changed.update(entries)

    server = _senteval_with(mirror_files, edit)
    try:
        assert _download(server, tmp_path / "data", "STSBenchmark-dev") == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "sts-dev.csv differ from the recorded copies" in err[0] and "--accept-changed" in err[0]
        assert not (tmp_path / "data" / "sts").exists()
        assert main(["download", "STSBenchmark-dev", "--data-dir", str(tmp_path / "data"), "--mirror", server.url,
                     "--accept-changed"]) == 0
    finally:
        server.close()
    out = capsys.readouterr().out
    assert "note: not the recorded copies" in out and out.count("STSBenchmark/sts-dev.csv") == 1
    installed = tmp_path / "data/sts/senteval/downstream/STS/STSBenchmark/sts-dev.csv"
    assert installed.read_bytes() == changed["STS/STSBenchmark/sts-dev.csv"]


def test_an_extra_file_in_an_archive_folder_installs_nothing_unless_accepted(mirror_files, tmp_path, capsys):
    server = _senteval_with(mirror_files, lambda entries: entries.update({"STS/STS12-en-test/extra.py": b"x = 1"}))
    try:
        assert _download(server, tmp_path / "data", "STSBenchmark-dev") == 1
        err = capsys.readouterr().err
        assert "1 file(s) have no recorded checksum (sts/senteval/downstream/STS/STS12-en-test/extra.py)" in err
        assert not (tmp_path / "data" / "sts").exists()
        assert main(["download", "STSBenchmark-dev", "--data-dir", str(tmp_path / "data"), "--mirror", server.url,
                     "--accept-changed"]) == 0
    finally:
        server.close()
    assert (tmp_path / "data/sts/senteval/downstream/STS/STS12-en-test/extra.py").is_file()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_data_directory_is_refused(server, tmp_path, capsys):
    target = tmp_path / "data"
    target.mkdir()
    target.chmod(0o555)
    try:
        assert _download(server, target, "clustering") == 2
    finally:
        target.chmod(0o755)
    assert "cannot be written" in _one_error_line(capsys) and server.log == []
