"""The base of gpuplan's validated, immutable objects (pydantic, ``extra="forbid"``).

One rule lives here because pydantic's lax mode does not apply it: a boolean is not a number. YAML
reads ``count: yes`` or ``rate_rps: true`` as a boolean (JSON bodies carry ``true`` too), and lax
validation would turn it into 1 or 1.0 silently; strict mode would refuse it but also the lists YAML
gives for tuples. So a field that holds numbers refuses booleans, in lists, tuples and dict values as
well, unless its type also admits ``bool``; everything else stays lax.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

_NUMBERS = (int, float)
_SEQUENCES = (list, tuple, set, frozenset)
_PLAIN = frozenset({int, float, str, type(None)})
"""Value types that cannot hide a boolean: the validator returns at once for them (the hot path)."""
_FIELD_MEMBERS: dict[tuple[type, str], list[object]] = {}


def _members(annotation: object) -> list[object]:
    """The types a field may hold: a union's members (None dropped), an Annotated's base type."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) if arg is not type(None) for m in _members(arg)]
    return [annotation]


def _boolean_as_number(members: list[object], value: object) -> bool:
    """Whether ``value`` puts a boolean where a field of these member types wants a number, at any
    depth of a list, tuple or dict (a union that also admits ``bool`` keeps its booleans)."""
    if type(value) in _PLAIN:
        return False
    if isinstance(value, bool):
        return bool not in members and any(m in _NUMBERS for m in members)
    if isinstance(value, (list, tuple)):
        return any(_item_is_boolean_number(m, i, item) for m in members for i, item in enumerate(value))
    if isinstance(value, dict):
        return any(
            typing.get_origin(m) is dict and _boolean_as_number(_members(typing.get_args(m)[1]), item)
            for m in members
            for item in value.values()
        )
    return False


def _item_is_boolean_number(container: object, index: int, item: object) -> bool:
    """The i-th item of a list/tuple/set value against the container type's item type."""
    origin, args = typing.get_origin(container), typing.get_args(container)
    if origin not in _SEQUENCES or not args:
        return False
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return index < len(args) and _boolean_as_number(_members(args[index]), item)
    return _boolean_as_number(_members(args[0]), item)


class FrozenModel(BaseModel):
    """Immutable; unknown fields and booleans in number fields are validation errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if type(value) in _PLAIN:  # most values: nothing to look up
            return value
        name = info.field_name or ""
        members = _FIELD_MEMBERS.get((cls, name))
        if members is None:
            field = cls.model_fields.get(name)
            members = _FIELD_MEMBERS.setdefault((cls, name), _members(field.annotation) if field else [])
        if _boolean_as_number(members, value):
            raise PydanticCustomError("number_not_boolean", "expected a number, got a boolean (true/false)")
        return value


class FiniteModel(FrozenModel):
    """A ``FrozenModel`` whose numbers must also be finite (no NaN or infinity)."""

    model_config = ConfigDict(allow_inf_nan=False)
