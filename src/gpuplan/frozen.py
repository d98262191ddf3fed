"""The base of gpuplan's validated, immutable objects (pydantic, ``extra="forbid"``).

One rule lives here because pydantic's lax mode does not apply it: a boolean is not a number. YAML
reads ``count: yes`` or ``rate_rps: true`` as a boolean, and lax validation would turn it into 1 or
1.0 silently; strict mode would refuse it but also the lists YAML gives for tuples. So a number field
refuses booleans by name, and everything else stays lax.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

_NUMBERS = (int, float)


def _is_number_type(annotation: object) -> bool:
    """``int``, ``float``, or an optional/union of them (bool, a subclass of int, is not one)."""
    if annotation in _NUMBERS:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_number_type(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return bool(members) and all(_is_number_type(a) for a in members)
    return False


class FrozenModel(BaseModel):
    """Immutable; unknown fields and booleans in number fields are validation errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            field = cls.model_fields.get(info.field_name)
            if field is not None and _is_number_type(field.annotation):
                raise PydanticCustomError(
                    "number_not_boolean", "expected a number, got the boolean {value}", {"value": str(value).lower()}
                )
        return value


class FiniteModel(FrozenModel):
    """A ``FrozenModel`` whose numbers must also be finite (no NaN or infinity)."""

    model_config = ConfigDict(allow_inf_nan=False)
