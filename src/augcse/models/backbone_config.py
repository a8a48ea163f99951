"""``model.config``: values of a backbone's config replaced before its weights load (a paper's dropout).

``Transformer(config_kwargs=…)`` sets any key it is given, one the config does not have included, as a new
attribute that nothing reads; a recipe's key is checked against the backbone's ``config.json`` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ConfigKeyError(ValueError):
    """A ``model.config`` key the backbone's config does not have."""


def check_config(backbone: str, config: Mapping[str, Any] | None) -> dict[str, Any]:
    """``config`` if every key is a value of the backbone's config; ``Transformer`` would otherwise add an
    unknown key as a new attribute that nothing reads, silently. Reads only ``config.json``."""
    if not config:
        return {}
    from transformers import AutoConfig

    known = AutoConfig.from_pretrained(backbone).to_dict()
    unknown = [key for key in config if key not in known]
    if unknown:
        dropout = ", ".join(sorted(key for key in known if "dropout" in key)) or "none"
        raise ConfigKeyError(f"recipe key 'model.config.{unknown[0]}': the backbone's config has no {unknown[0]} "
                             f"(its dropout keys: {dropout})")
    return dict(config)
