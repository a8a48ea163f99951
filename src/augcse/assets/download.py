"""``augcse download``: the evaluation data and wiki1m from their official sources, into the data directory.

Sources are data (``data/downloads.yaml``): official URLs, the files each yields in the data-directory
layout and how they are converted (e.g. ``label<TAB>text`` to ``text,label`` CSV). Downloads resume with
HTTP ``Range`` requests; a source is unpacked and converted into a temporary folder, every file is verified
against its recorded checksum (``data/checksums.sha256``, sha256 of the file as it lands in the data
directory), and only then are the files moved into place, so the data directory never holds a half-unpacked
source. A checksum failure discards the download and fetches it again, up to ``--retries`` times. A file
without a recorded checksum, or one of the files whose copies differ between releases (``may_differ``) that
is not the recorded copy, installs nothing unless the user says so (``accept_changed``, ``--accept-changed``).
This is the only downloader: evaluation and training fetch an ``on_demand`` source through
:func:`install_on_demand` when a file of it is missing.
"""

from __future__ import annotations

import csv
import hashlib
import http.client
import io
import json
import logging
import os
import shutil
import stat
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from augcse.core import yamlfile

logger = logging.getLogger(__name__)
MIRROR_ENV = "AUGCSE_DOWNLOAD_MIRROR"
CHUNK = 1 << 16


class Group(str, Enum):
    STS = "sts"
    TRANSFER = "transfer"
    CLUSTERING = "clustering"
    INTENT = "intent"
    CORPUS = "corpus"


class DownloadError(RuntimeError):
    """A download or its verification failed; the message says which file and what to do."""


class Unrecoverable(DownloadError):
    """The host could not be reached (no network, a wrong mirror) or the download cannot be written:
    trying again will not help."""


@dataclass(frozen=True)
class Member:
    """A file (or, when ``target`` ends with "/", a folder) of the data directory and what it is made from."""

    target: str
    inputs: tuple[str, ...]  # "key" or "key:path inside the archive" ("…/" for a folder)
    convert: str = "copy"
    option: str | None = None


@dataclass(frozen=True)
class Source:
    name: str
    group: Group
    licence: str
    downloads: dict[str, str]
    members: tuple[Member, ...]
    may_differ: frozenset[str] = frozenset()  # a mismatch of these is no corruption: not fetched again
    on_demand: bool = False  # fetched by evaluation/training when one of its files is missing

    def installs(self, path: str) -> Member | None:
        """The member that writes the data-directory file ``path``, or None."""
        for member in self.members:
            if path == member.target or (member.target.endswith("/") and path.startswith(member.target)):
                return member
        return None


@cache
def sources() -> tuple[Source, ...]:
    text = resources.files("augcse").joinpath("data/downloads.yaml").read_text(encoding="utf-8")
    data = yamlfile.load(text)  # read by every task registry
    out = []
    for spec in data["sources"]:
        members = tuple(Member(m["target"], tuple(m["inputs"]), m.get("convert", "copy"), m.get("option"))
                        for m in spec["members"])
        for member in members:
            if member.convert not in CONVERTERS:
                raise ValueError(f"downloads.yaml {spec['name']}: unknown convert {member.convert!r}")
        out.append(Source(spec["name"], Group(spec["group"]), spec["licence"], dict(spec["downloads"]), members,
                          frozenset(spec.get("may_differ", ())), bool(spec.get("on_demand", False))))
    return tuple(out)


@cache
def checksums() -> dict[str, str]:
    """Recorded sha256 by data-directory path (files as they land there, see the module docstring)."""
    text = resources.files("augcse").joinpath("data/checksums.sha256").read_text(encoding="utf-8")
    return {path: digest for digest, path in (line.split(None, 1) for line in text.splitlines() if line.strip())}


def source_for(path: str) -> Source | None:
    """The source that installs the data-directory file ``path``."""
    return next((source for source in sources() if source.installs(path)), None)


def source_of(path: str) -> str | None:
    """``"NAME: URL …"``: where the data-directory file ``path`` is downloaded from, or None."""
    source = source_for(path)
    if source is None:
        return None
    urls = dict.fromkeys(source.downloads[spec.partition(":")[0]] for spec in source.installs(path).inputs)
    return f"{source.name}: {' '.join(urls)}"


# --------------------------------------------------------------------------- converters

def _lines(data: bytes) -> list[str]:
    lines = data.decode("utf-8").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _csv(rows: list[tuple[str, str]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(("text", "label"))
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def _label_tab_text(inputs: list[bytes], option: str | None) -> bytes:
    """Short-text clustering files: ``label<TAB>text`` (CR and one trailing format TAB stripped)."""
    rows = []
    for line in _lines(inputs[0]):
        label, _, text = line.rstrip("\r").partition("\t")
        rows.append((text[:-1] if text.endswith("\t") else text, label))
    return _csv(rows)


def _seq_label(inputs: list[bytes], option: str | None) -> bytes:
    """The ``seq.in`` + ``label`` pair of the few-shot intent repositories."""
    texts, labels = _lines(inputs[0]), _lines(inputs[1])
    if len(texts) != len(labels):
        raise DownloadError(f"seq.in has {len(texts)} lines but label has {len(labels)}")
    return _csv(list(zip(texts, labels)))


def _json_split(inputs: list[bytes], option: str | None) -> bytes:
    """One split (``option``) of CLINC150's ``data_full.json``: a list of ``[text, intent]``."""
    return _csv([(text, label) for text, label in json.loads(inputs[0])[option]])


def _category_to_label(inputs: list[bytes], option: str | None) -> bytes:
    """BANKING77's ``text,category`` CSV with the label column renamed."""
    rows = list(csv.reader(io.StringIO(inputs[0].decode("utf-8"), newline="")))
    if rows[0] != ["text", "category"]:
        raise DownloadError(f"expected the header text,category, got {rows[0]}")
    return _csv([(text, label) for text, label in rows[1:]])


def _copy(inputs: list[bytes], option: str | None) -> bytes:
    return inputs[0]


CONVERTERS: dict[str, Callable[[list[bytes], str | None], bytes]] = {
    "copy": _copy,
    "label_tab_text": _label_tab_text,
    "seq_label": _seq_label,
    "json_split": _json_split,
    "category_to_label": _category_to_label,
}


# --------------------------------------------------------------------------- fetching

def mirrored(url: str, mirror: str | None) -> str:
    """``url`` under ``mirror`` (``MIRROR/host/path``), or unchanged without one."""
    if not mirror:
        return url
    parts = urlsplit(url)
    return f"{mirror.rstrip('/')}/{parts.netloc}{parts.path}"


def fetch(url: str, dest: Path, log: Callable[[str], None] = print) -> Path:
    """Download ``url`` to ``dest``, continuing a partial ``dest.part`` with an HTTP Range request.

    A connection that ends before the announced length raises :class:`DownloadError` and keeps the part,
    so the next call continues from where it stopped.
    """
    if dest.is_file():
        return dest
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - official http(s) URLs
            resumed = bool(have) and response.status == 206
            if resumed:
                log(f"  resuming {url} at byte {have}")
            length = response.headers.get("Content-Length")
            expected = (have if resumed else 0) + int(length) if length is not None else None
            with open(part, "ab" if resumed else "wb") as out:
                try:
                    shutil.copyfileobj(response, out, CHUNK)
                except http.client.IncompleteRead as exc:
                    out.write(exc.partial)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the part is already complete
            part.replace(dest)
            return dest
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise Unrecoverable(f"cannot reach {urlsplit(url).netloc or url} ({exc.reason}); check the network "
                            f"connection, or fetch from a mirror with --mirror URL (or ${MIRROR_ENV})") from None
    except OSError as exc:
        if exc.filename is not None:  # writing the part, not the connection
            raise Unrecoverable(f"cannot write {exc.filename} ({exc.strerror})") from None
        raise DownloadError(f"{url}: the connection failed ({exc})") from None
    got = part.stat().st_size
    if expected is not None and got < expected:
        raise DownloadError(f"{url}: connection ended at {got} of {expected} bytes")
    part.replace(dest)
    return dest


# the most one file taken from a download (an archive member, a converted file) and all of one source's files
# together may hold once unpacked; more is refused as it is written, so a member that inflates without bound never
# fills the memory or the disk (module attributes: tests lower them)
MAX_MEMBER_BYTES, MAX_SOURCE_BYTES = 1 << 30, 8 << 30


class Refused(DownloadError):
    """A download whose archive holds what is never installed (a link, a member too large): fetching it again
    gives the same archive, so it is not retried."""


class _Budget:
    """Bytes written so far for one source, against :data:`MAX_SOURCE_BYTES`."""

    def __init__(self) -> None:
        self.total = 0

    def take(self, added: int, file_size: int, name: str) -> None:
        """Count ``added`` bytes more of the file ``name``, now ``file_size`` bytes; refuse past either bound."""
        self.total += added
        if file_size > MAX_MEMBER_BYTES:
            raise Refused(f"{name} inflates past {_mib(MAX_MEMBER_BYTES)}, the most one file of a download may hold "
                          "(no published file comes near it)")
        if self.total > MAX_SOURCE_BYTES:
            raise Refused(f"the files unpack past {_mib(MAX_SOURCE_BYTES)} at {name}, the most one source may hold "
                          "(no published source comes near it)")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


def _link_kind(member: zipfile.ZipInfo | tarfile.TarInfo) -> str | None:
    """"a symbolic link" or "a hard link" for an archive member that is one, else None (zip marks a link in the
    file mode of its external attributes, as ``zip --symlinks`` writes it)."""
    if isinstance(member, zipfile.ZipInfo):
        return "a symbolic link" if stat.S_ISLNK(member.external_attr >> 16) else None
    return "a symbolic link" if member.issym() else "a hard link" if member.islnk() else None


@contextmanager
def _input_streams(spec: str, files: dict[str, Path]) -> Iterator[Iterator[tuple[str, BinaryIO]]]:
    """``(relative name, open binary stream)`` for each file of an input, opened one at a time: a whole file, one
    archive member, or an archive folder; a link among the chosen members is refused, never installed as a file."""
    key, _, inner = spec.partition(":")
    path = files[key]
    if not inner:
        with open(path, "rb") as handle:
            yield iter([("", handle)])
        return
    if zipfile.is_zipfile(path):
        archive: zipfile.ZipFile | tarfile.TarFile = zipfile.ZipFile(path)
        members = {m.filename: m for m in archive.infolist() if not m.is_dir()}
    else:
        archive = tarfile.open(path)
        members = {m.name: m for m in archive.getmembers() if m.isfile() or m.issym() or m.islnk()}
    with archive:
        chosen = _select(members, inner, spec)
        for rel, member in chosen.items():
            kind = _link_kind(member) or ("named with .." if ".." in rel.split("/") else None)
            if kind:
                raise Refused(f"{key}:{inner if rel == '' else inner + rel} is {kind}; augcse installs only an "
                              "archive's plain files inside the folders it names")
        opener = archive.open if isinstance(archive, zipfile.ZipFile) else archive.extractfile
        yield ((rel, opener(member)) for rel, member in chosen.items())


def _select(names: dict, inner: str, spec: str) -> dict:
    if inner.endswith("/"):
        chosen = {n[len(inner):]: v for n, v in names.items() if n.startswith(inner)}
    else:
        chosen = {"": names[inner]} if inner in names else {}
    if not chosen:
        raise DownloadError(f"{spec}: not in the downloaded archive")
    return chosen


def _stage(source: Source, files: dict[str, Path], staging: Path) -> dict[str, str]:
    """Write every member of ``source`` under ``staging``; returns ``{data-directory path: sha256}`` of what it
    wrote. Copies stream in chunks; a converter's inputs are read whole, each under :data:`MAX_MEMBER_BYTES`."""
    budget, written = _Budget(), {}
    for member in source.members:
        if member.target.endswith("/") or member.convert == "copy":
            with _input_streams(member.inputs[0], files) as streams:
                for rel, stream in streams:
                    with stream:
                        written[member.target + rel] = _write(staging, member.target + rel, stream, budget)
        else:
            inputs = []
            for spec in member.inputs:
                with _input_streams(spec, files) as streams:
                    for _, stream in streams:
                        with stream:
                            inputs.append(_read_capped(stream, spec, budget))
            data = CONVERTERS[member.convert](inputs, member.option)
            written[member.target] = _write(staging, member.target, io.BytesIO(data), budget)
    return written


def _read_capped(stream: BinaryIO, name: str, budget: _Budget) -> bytes:
    """A converter's input, read in chunks and refused once past :data:`MAX_MEMBER_BYTES` (it is not counted
    against the source's total: only what is written is)."""
    data = bytearray()
    for block in iter(lambda: stream.read(CHUNK), b""):
        data += block
        budget.take(0, len(data), name)
    return bytes(data)


def _write(staging: Path, relpath: str, stream: BinaryIO, budget: _Budget) -> str:
    """Copy ``stream`` to ``staging/relpath`` in chunks, within the budget, hashing as it goes; its sha256."""
    out = staging / relpath
    out.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with open(out, "wb") as handle:
        for block in iter(lambda: stream.read(CHUNK), b""):
            size += len(block)
            budget.take(len(block), size, relpath)
            digest.update(block)
            handle.write(block)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(written: dict[str, str]) -> tuple[list[str], int]:
    """Paths whose sha256 differs from the recorded one, and how many had no recorded checksum."""
    recorded = checksums()
    bad = [p for p, digest in written.items() if p in recorded and digest != recorded[p]]
    return bad, sum(p not in recorded for p in written)


def install(source: Source, data_dir: Path, cache_dir: Path, mirror: str | None = None, retries: int = 2,
            log: Callable[[str], None] = print, accept_changed: bool = False) -> list[str]:
    """Fetch, convert, verify and move one source into ``data_dir``; returns the paths it installed.
    ``accept_changed`` installs files with no recorded checksum and ``may_differ`` files unlike the recorded
    copy (both refused otherwise); a corrupted file of any other kind is never installed."""
    log(f"{source.name} ({source.group.value}); licence: {source.licence}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    for attempt in range(retries + 1):
        files = {}
        try:
            for key, url in source.downloads.items():
                real = mirrored(url, mirror)
                name = hashlib.sha1(url.encode()).hexdigest()[:16] + "-" + Path(urlsplit(url).path).name
                log(f"  fetching {real}")
                files[key] = fetch(real, cache_dir / name, log)
        except Unrecoverable as exc:
            raise DownloadError(f"{source.name}: {exc}") from None
        except DownloadError as exc:
            if attempt == retries:
                raise DownloadError(f"{source.name}: {exc} ({retries + 1} attempts); nothing was installed") from None
            log(f"  {exc}; trying again ({attempt + 1}/{retries})")
            continue
        with tempfile.TemporaryDirectory(prefix=f".augcse-{source.name}-", dir=data_dir) as tmp:
            staging = Path(tmp)
            try:
                written = _stage(source, files, staging)
                bad, unverified = _verify(written)
                differ, bad = [p for p in bad if p in source.may_differ], [p for p in bad if p not in source.may_differ]
            except Refused as exc:
                raise Refused(f"{source.name}: {exc}; nothing was installed") from None
            except (zipfile.BadZipFile, tarfile.TarError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                written, bad, differ, unverified = [], [f"(unreadable download: {exc})"], [], 0
            if not bad:
                unrecorded = [p for p in written if p not in checksums()]
                if (differ or unrecorded) and not accept_changed:
                    raise DownloadError(_unverified(source, differ, unrecorded))
                if differ:
                    log(f"  note: not the recorded copies the evaluation was measured on, installed as asked (this "
                        f"source's copies differ between releases; scores may differ slightly): {', '.join(differ)}")
                for relpath in written:
                    final = data_dir / relpath
                    final.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(staging / relpath, final)
                log(f"  installed {len(written)} files ({len(written) - unverified} checked against recorded "
                    f"sha256, {unverified} without a recorded checksum)")
                return list(written)
        for path in files.values():  # discard what failed, and fetch it again
            path.unlink(missing_ok=True)
        log(f"  checksum mismatch in {', '.join(bad[:3])}" + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "")
            + (f"; downloading again ({attempt + 1}/{retries})" if attempt < retries else ""))
    raise DownloadError(f"{source.name}: files still differ from the recorded sha256 after {retries + 1} downloads "
                        f"({', '.join(bad[:3])}); the source may have changed: nothing was installed")


def _unverified(source: Source, differ: list[str], unrecorded: list[str]) -> str:
    """Why a download that is not corrupt still installs nothing, and the flag that installs it."""
    parts = ([f"{', '.join(differ[:3])} differ from the recorded copies the evaluation was measured on (this "
              "source's releases differ)"] if differ else [])
    parts += [f"{len(unrecorded)} file(s) have no recorded checksum ({', '.join(unrecorded[:3])})"] if unrecorded else []
    return (f"{source.name}: {'; '.join(parts)}; nothing was installed: pass --accept-changed to install them "
            "anyway")


def install_on_demand(path: str, root: Path) -> Path | None:
    """Install the ``on_demand`` source holding the data-directory file ``path`` under ``root``.

    Returns the installed file, or None when no on-demand source holds ``path``; raises
    :class:`DownloadError` when the download or its checksum fails (nothing is then installed).
    """
    source = source_for(path)
    if source is None or not source.on_demand:
        return None
    root.mkdir(parents=True, exist_ok=True)
    install(source, root, root / ".downloads", os.environ.get(MIRROR_ENV), log=logger.info)
    return root / path
