"""Which module types of a saved model augcse builds: sentence-transformers' own and augcse's, never a folder's code.

A model folder names its modules by type in ``modules.json`` (a Router names its sub-modules in its own config).
sentence-transformers imports any other type only under ``trust_remote_code``, one switch for the whole load
that transformers also reads for ``auto_map`` entries of ``config.json`` and ``tokenizer_config.json``. augcse
never turns it on: each type is resolved here to a class of the installed sentence-transformers or augcse (an
``nn.Module``, so a name such as ``sentence_transformers.….pickle`` is no way in), and a folder that needs
anything else is refused in one line naming the type.

augcse's own module (PromptBERT's :class:`~augcse.models.prompt_transformer.PromptTransformer`) is saved with a
copy of its file so that plain sentence-transformers loads it with ``trust_remote_code=True``
(:func:`make_portable`); augcse maps that copy's type to the installed class and never imports the copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

# the modules augcse saves, by every type a folder may name them with: the installed module's dotted path, the
# path before the module was split out (older folders), and the copy a portable folder carries
_PROMPT = "augcse.models.prompt_transformer.PromptTransformer"
OWN: dict[str, str] = {_PROMPT: _PROMPT, "augcse.models.prompt.PromptTransformer": _PROMPT,
                       "prompt_transformer.PromptTransformer": _PROMPT}
# what make_portable writes for each own class: (the installed module whose file is copied, the type written)
PORTABLE: dict[str, tuple[str, str]] = {_PROMPT: ("augcse.models.prompt_transformer",
                                                  "prompt_transformer.PromptTransformer")}
ROUTER_CONFIGS = ("router_config.json", "config.json")  # where a Router keeps its sub-module types, newest first


class ForeignCode(ValueError):
    """A model folder needs code that is neither sentence-transformers' nor augcse's; ``str()`` is one line."""


def _import(dotted: str) -> object:
    from importlib import import_module

    module, _, name = dotted.rpartition(".")
    return getattr(import_module(module), name)


def module_class(class_ref: str, where: str | Path) -> type[nn.Module]:
    """The installed class for a ``modules.json`` type; :class:`ForeignCode` for any other."""
    from torch import nn

    refuse = (f"{where} names the module type {class_ref!r}, which is not a module of sentence-transformers or "
              "augcse; augcse never runs a model folder's own code (only if you trust its author, load it with "
              "sentence-transformers' trust_remote_code=True)")
    if not isinstance(class_ref, str) or not (class_ref in OWN or class_ref.startswith("sentence_transformers.")):
        raise ForeignCode(refuse)
    try:
        found = _import(OWN.get(class_ref, class_ref))
    except (ImportError, AttributeError, ValueError):
        raise ForeignCode(refuse) from None
    if not (isinstance(found, type) and issubclass(found, nn.Module)):
        raise ForeignCode(refuse)
    return found


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not readable JSON ({str(exc).splitlines()[0]})") from None


def _inside(folder: Path, relative: object, where: Path) -> Path:
    """``folder / relative`` where ``relative`` is a plain relative path (no ``..``, not absolute)."""
    parts = PurePosixPath(str(relative)).parts
    if not isinstance(relative, str) or PurePosixPath(relative).is_absolute() or ".." in parts or "\\" in relative:
        raise ForeignCode(f"{where} names the module path {relative!r}, outside the model folder")
    return folder.joinpath(*parts)


def check_folder(folder: Path) -> dict[str, type[nn.Module]]:
    """Every module type of ``folder`` (its ``modules.json`` and any Router's sub-modules), resolved or refused;
    returns ``{type: class}`` of the types that are augcse's own (empty: sentence-transformers loads it)."""
    from sentence_transformers.base.modules import Router

    entries = _json(folder / "modules.json")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "type" in e for e in entries):
        raise ValueError(f"{folder / 'modules.json'}: not a list of modules with a 'type' each")
    own: dict[str, type[nn.Module]] = {}
    pending = [(folder, [(e.get("path", ""), e["type"]) for e in entries], folder / "modules.json")]
    while pending:
        base, items, where = pending.pop()
        for path, class_ref in items:
            found = module_class(class_ref, where)
            if class_ref in OWN:
                own[class_ref] = found
            if issubclass(found, Router):
                sub = _inside(base, path, where)
                config = next((sub / name for name in ROUTER_CONFIGS if (sub / name).is_file()), None)
                data = _json(config) if config else {}
                types = data.get("types", {}) if isinstance(data, dict) else None
                if not isinstance(types, dict):
                    raise ValueError(f"{config}: 'types' is not a mapping of module names to types")
                for name in types:
                    _inside(sub, name, config)
                pending.append((sub, list(types.items()), config))
    return own


def make_portable(folder: str | Path) -> None:
    """Let plain sentence-transformers load a saved model folder: each augcse module of ``modules.json`` gets a
    copy of its (self-contained) file beside its files and the type that names that copy, the form custom
    modules take on the Hub. Nothing changes for a folder of sentence-transformers modules alone."""
    from importlib import import_module

    folder = Path(folder)
    listing = folder / "modules.json"
    entries = json.loads(listing.read_text(encoding="utf-8"))
    changed = False
    for entry in entries:
        if entry.get("type") in PORTABLE:
            module, written = PORTABLE[entry["type"]]
            source = Path(import_module(module).__file__)
            shutil.copyfile(source, folder / entry.get("path", "") / f"{written.rsplit('.', 1)[0]}.py")
            entry["type"], changed = written, True
    if changed:
        listing.write_text(json.dumps(entries, indent=2), encoding="utf-8")
