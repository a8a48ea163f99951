"""Where a corpus a recipe names is on this machine, and the one line that says how to get it if it is not.

Training (before it starts), ``augcse reproduce`` (its dry run and its refusal) and ``augcse study`` all ask
here, so they find the same file and give the same advice. Nothing is downloaded and nothing substituted.
"""

from __future__ import annotations

import os
from pathlib import Path

from augcse.assets.download import source_for
from augcse.assets.resolve import AssetError, data_dir as resolve_data_dir, has_data, resolve_data
from augcse.text.sts_corpus import CORPUS as STS_CORPUS


def find_corpus(corpus: str, data_dir: str | os.PathLike | None) -> Path | None:
    """``corpus`` as a file path, else under the data directory (or a packaged copy); None when neither."""
    path = Path(corpus).expanduser()
    if path.is_file():
        return path
    return resolve_data(corpus, data_dir, download=False) if has_data(corpus, data_dir) else None


def how_to_get(corpus: str, data_dir: str | os.PathLike | None) -> str:
    """The command that makes or fetches ``corpus`` into the data directory, or that none does."""
    try:
        root = resolve_data_dir(data_dir)
    except AssetError:  # a data directory that does not exist is refused where it is first read
        root = None
    target = str(root) if root else "DIR"
    if corpus == STS_CORPUS:
        return f"`python -m augcse.text.sts_corpus --output {target}/{corpus}` makes it"
    source = source_for(corpus)
    if source is not None:
        return f"`augcse download {source.group.value} --data-dir {target}` fetches it"
    return "no augcse command fetches or makes it: give the file"
