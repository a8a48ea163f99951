"""Check keyword parameters against a callable's signature before anything heavy runs.

Recipes pass user-written parameters to view builders and losses. Their names and type hints are
the documentation, so they are also the validation: an unknown name gets a "did you mean", a value
of the wrong type or outside a ``Literal`` is refused, each in one line naming the recipe key.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints


class ParameterError(ValueError):
    """A parameter is unknown or of the wrong type; the message is one line."""


def suggest(name: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for a near match (ignoring case, ``-`` and ``_``), else the list of choices."""
    from augcse.names import suggest as near

    return near(name, choices) or f"; choose one of {', '.join(choices)}"


def _matches(value: Any, hint: Any) -> bool:
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_matches(value, arg) for arg in get_args(hint))
    if origin is Literal:
        return any(value == arg and type(value) is type(arg) for arg in get_args(hint))
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        inner = get_args(hint)
        return isinstance(value, (list, tuple)) and (not inner or all(_matches(v, inner[0]) for v in value))
    if origin in (dict, Mapping) or hint is dict:
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def describe(hint: Any) -> str:
    """A short human form of a type hint (``0.5``-style values for literals)."""
    origin = get_origin(hint)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in get_args(hint))
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", str(hint)).replace("typing.", "")


def check_params(fn: Callable, params: Mapping[str, Any], where: str, skip: Sequence[str] = ()) -> dict[str, Any]:
    """Validate ``params`` against ``fn``'s keyword parameters; returns them with the defaults filled in.

    ``where`` is the recipe key prefix used in messages (``loss.params``, ``data.views[0]``); ``skip``
    names parameters the caller supplies itself (``model``, ``dataset``, ``context``).
    """
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn.__init__ if inspect.isclass(fn) else fn)
    except Exception:  # unresolvable annotations: names are still checked
        hints = {}
    allowed = [n for n, p in signature.parameters.items()
               if n not in skip and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for name, value in params.items():
        if name not in allowed:
            raise ParameterError(f"recipe key '{where}.{name}': unknown parameter{suggest(name, allowed)}")
        hint = hints.get(name, inspect.Parameter.empty)
        if not _matches(value, hint):
            raise ParameterError(f"recipe key '{where}.{name}' must be {describe(hint)}, got {value!r}")
    out = {n: signature.parameters[n].default for n in allowed
           if signature.parameters[n].default is not inspect.Parameter.empty}
    missing = [n for n in allowed if n not in params and n not in out]
    if missing:
        raise ParameterError(f"recipe key '{where}.{missing[0]}' is required")
    out.update(params)
    return out
