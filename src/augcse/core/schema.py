"""One validation schema: every recipe setting and component parameter is a pydantic field, refused in one line.

Recipe sections, loss parameters, view parameters and augmentation parameters are all declared as
pydantic fields with their types and ranges (``Annotated[float, Field(gt=0)]``) and validated here,
strictly (YAML's ``1`` is not ``true``, ``"1"`` is not ``1``) and with finite floats only. A pydantic
``ValidationError`` becomes one line naming the key: ``recipe key 'loss.params.temperature' must be
> 0, got -1``. Importing this module loads no torch, so a recipe is refused before anything heavy loads.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from augcse.core.names import suggest


class RecipeError(ValueError):
    """A setting is invalid; the message is one line saying which key, what is wrong and how to fix it."""


class FieldsError(ValueError):
    """A check across several fields of a section (a pydantic ``model_validator``), naming the fields it read.

    pydantic reports such an error at the section itself, with no key; raised with the fields, the refusal names
    them (``recipe keys 'loss.params.symmetric' and 'loss.params.mask_own_text': …``) wherever the section sits.
    A field is its name or, below the section, its parts (``("terms", 0, "params", "mini_batch_size")``).
    """

    def __init__(self, fields: Sequence[str | tuple[str | int, ...]], message: str) -> None:
        super().__init__(message)
        self.fields = [(field,) if isinstance(field, str) else tuple(field) for field in fields]


class Section(BaseModel):
    """A group of settings: unknown keys refused, types strict (as YAML writes them), floats finite."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, arbitrary_types_allowed=True)


class KeyedSection(Section):
    """A section at a fixed place in a recipe: built in Python (``DataConfig(limit=0)``), a bad value is
    refused in the same line as in a recipe file."""

    key: ClassVar[str] = ""  # where the section sits in a recipe (``data``), for its messages

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise RecipeError(describe_error(exc, type(self), self.key)) from None


# the ranges used across the project, each stated once
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Probability = Annotated[float, Field(ge=0, le=1)]
# τ of a softmax over similarities: the logits sim/τ (|sim| ≤ 1 for cosine) of a smaller τ pass float16's largest
# value (65,504) and the loss goes non-finite at its first step, whatever the learning rate; the papers use 0.01–0.1
MIN_TEMPERATURE = 1e-4


def _plausible_temperature(value: float) -> float:
    if value < MIN_TEMPERATURE:
        raise ValueError(f"must be at least {MIN_TEMPERATURE:g} (the papers use 0.01 to 0.1; below it the logits "
                         f"similarity/τ overflow and the loss is not finite), got {value:g}")
    return value


Temperature = Annotated[float, Field(gt=0), AfterValidator(_plausible_temperature)]


def _distinct_ascending(steps: list[int]) -> list[int]:
    if len(set(steps)) != len(steps):
        raise ValueError(f"must be distinct step counts, got {steps}")
    return sorted(steps)


# training steps after which a run is also scored (augcse.training.budgets): eval.budgets, a study's budgets
Budgets = Annotated[list[PositiveInt], AfterValidator(_distinct_ascending)]

M = TypeVar("M", bound=BaseModel)

_TYPES = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
          "string_type": "a string", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
          "dataclass_type": "a mapping", "none_required": "null", "finite_number": "a finite number",
          "tuple_type": "a list"}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def _field_names(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The keys allowed at ``loc`` under ``model`` (for an unknown key's "allowed here")."""
    current: Any = model
    for part in loc:
        while True:  # unwrap Annotated, Optional and list[...] down to a model
            origin = get_origin(current)
            if origin is Annotated:
                current = get_args(current)[0]
            elif origin in (Union, types.UnionType):
                models = [a for a in get_args(current) if isinstance(a, type) and issubclass(a, BaseModel)]
                current = models[0] if models else None
            elif origin is list and isinstance(part, int):
                current = get_args(current)[0]
                break
            elif origin is dict:  # part is a key of the mapping (a grid's set or row name), not a field
                current = get_args(current)[1]
                part = 0
                break
            else:
                break
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return []
        current = current.model_fields[part].annotation
    while get_origin(current) is Annotated:
        current = get_args(current)[0]
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _requirement(error: Mapping[str, Any]) -> str:
    """What an error says the value must be (``> 0``, ``an integer``, ``one of 'a', 'b'``)."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _BOUNDS:
        bound = next(iter(ctx.values()))
        return f"{_BOUNDS[kind]} {bound:g}" if isinstance(bound, float) else f"{_BOUNDS[kind]} {bound}"
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        return "one of " + expected.replace(" or ", ", ")
    if kind in _TYPES:
        return _TYPES[kind]
    return error["msg"].removeprefix("Input should be ").removeprefix("Value error, ")


def describe_error(exc: ValidationError, model: type[BaseModel], prefix: str = "", subject: str = "recipe key") -> str:
    """The first error of ``exc`` as one line naming the dotted key (``prefix`` + the error's location)."""
    # an unknown key first: a misspelt key (``rowz``) is why the right one (``rows``) is missing
    errors = sorted(exc.errors(include_url=False),
                    key=lambda e: e["type"] not in ("extra_forbidden", "unexpected_keyword_argument"))
    first = errors[0]
    inner = (first.get("ctx") or {}).get("error")
    if isinstance(inner, RecipeError):  # a section built in Python already worded its error
        return str(inner)
    path = _path(first["loc"])

    def key(parts: Sequence[Any]) -> str:
        text = prefix
        for part in parts:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
        return text

    if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        name = str(first["loc"][-1])
        allowed = _field_names(model, path[:-1])
        return (f"unknown {subject} {key(path)!r}{suggest(name, allowed)}; "
                f"allowed here: {', '.join(allowed) or 'none'}")
    if first["type"] == "missing":
        return f"{subject} {key(path)!r} is required"
    if first["type"] in ("value_error", "assertion_error"):
        message = first["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if isinstance(inner, FieldsError):  # a check across fields: name the fields, not the section
            keys = [repr(key([*path, *field])) for field in inner.fields]
            named = keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} and {keys[-1]}"
            return f"{subject}{'s' if len(keys) > 1 else ''} {named}: {message}"
        if not key(path):  # the whole input, no key to name
            return f"{subject.split()[0]}: {message}"
        return f"{subject} {key(path)!r}{' ' if message.startswith('must ') else ': '}{message}"
    # a union reports one error per arm at the same key: "an integer or a string"
    same = [e for e in errors if _path(e["loc"]) == path and e["type"] != "extra_forbidden"]
    wanted = list(dict.fromkeys(_requirement(e) for e in same))
    hint = ""
    if first["type"] == "literal_error" and isinstance(first["input"], str):
        hint = suggest(first["input"], [a.strip("'") for a in (first.get("ctx") or {}).get("expected", "")
                                        .replace(" or ", ", ").split(", ")])
    if not path and not prefix:  # the whole input
        return f"{subject.split()[0]} must be a mapping of keys, got {first['input']!r}"
    return f"{subject} {key(path)!r} must be {' or '.join(wanted)}{hint}, got {first['input']!r}"


def _path(loc: Sequence[Any]) -> list[Any]:
    """An error location without the type tags pydantic adds for union arms: the keys and list indexes."""
    return [part for part in loc if isinstance(part, int) or not _is_tag(part)]


def _is_tag(part: str) -> bool:
    """pydantic's union-arm tags (``int``, ``list[str]``, ``function-after[...]``…)."""
    return any(c in part for c in "[]()-") or part in ("int", "float", "str", "bool", "none", "dict", "list",
                                                       "literal", "is-instance")


def validate_value(hint: Any, value: Any, name: str) -> Any:
    """``value`` validated as the type ``hint`` (strictly, as sections are); one-line :class:`RecipeError` naming
    ``name`` otherwise. For a setting passed on its own in Python (e.g. budgets to ``BudgetEvaluation``)."""
    holder = create_model("Value", __base__=Section, value=(hint, ...))
    try:
        return holder.model_validate({"value": value}).value
    except ValidationError as exc:
        raise RecipeError(describe_error(exc, holder, subject="setting").replace("'value", f"'{name}", 1)) from None


def validate(model: type[M], values: Any, prefix: str = "", subject: str = "recipe key") -> M:
    """``values`` validated as ``model``; a :class:`RecipeError` naming ``prefix.key`` otherwise.

    ``subject`` words the key: ``recipe key`` for recipes, ``SimCSELoss parameter`` for the Python API.
    """
    if not isinstance(values, Mapping):
        where = f" {prefix!r}" if prefix else ""
        raise RecipeError(f"{subject}{where} must be a mapping of keys, got {values!r}")
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        raise RecipeError(describe_error(exc, model, prefix, subject)) from None


def signature_model(fn: Callable, skip: Sequence[str] = ()) -> type[Section]:
    """A :class:`Section` with one field per keyword parameter of ``fn`` (its annotation and default).

    View builders and the library's own losses declare their parameters as a signature; this turns the
    signature into the schema, so a recipe and a Python call are checked by the same fields.
    """
    target = fn.__init__ if inspect.isclass(fn) else fn
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        if name in skip or name == "self" or param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (_resolve(target, param.annotation), default)
    return create_model(f"{getattr(fn, '__name__', 'Parameters')}Parameters", __base__=Section, **fields)


def _resolve(fn: Callable, annotation: Any) -> Any:
    """One parameter's annotation as a type (the others' may name what is imported only for type checkers)."""
    if annotation is inspect.Parameter.empty:
        return Any
    holder = types.SimpleNamespace(__annotations__={"value": annotation})
    try:
        return get_type_hints(holder, globalns=getattr(fn, "__globals__", {}), include_extras=True)["value"]
    except Exception:  # an annotation that does not resolve here (a library's forward reference): any value
        return Any


def describe(hint: Any) -> str:
    """A short human form of a type hint for the reference (``a number > 0``, ``one of 'a', 'b'``)."""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *meta = get_args(hint)
        bounds = []
        for item in meta:
            for m in getattr(item, "metadata", [item]):
                for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
                    if getattr(m, attr, None) is not None:
                        bounds.append(f"{sign} {getattr(m, attr)}")
        return describe(inner) + (f" ({', '.join(bounds)})" if bounds else "")
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in get_args(hint))
    if hint is type(None):
        return "null"
    if origin is not None:
        return getattr(origin, "__name__", str(origin)) + "[" + ", ".join(describe(a) for a in get_args(hint)) + "]"
    return getattr(hint, "__name__", str(hint)).replace("typing.", "")
