"""gpuplan.core.frozen: the validated base refuses booleans where numbers belong (YAML's yes/true), and stays lax
elsewhere (lists for tuples, ints for floats)."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from gpuplan.core.frozen import FiniteModel, FrozenModel


class _Knobs(FiniteModel):
    rate: float
    count: int | None = None
    share: Annotated[float, Field(ge=0)] = 0.0
    chunked: bool = True
    sizes: tuple[int, ...] = ()
    pair: tuple[str, float] = ("a", 0.0)
    factors: dict[str, float] = Field(default_factory=dict)
    level: int | str = 0
    flag_or_weight: bool | float = False
    name: str = "a"


MESSAGE = "expected a number, got a boolean (true/false)"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("rate", True),
        ("count", False),
        ("share", True),
        ("sizes", [1, True]),
        ("pair", ["x", True]),
        ("factors", {"hopper": True}),
        ("level", True),
    ],
)
def test_number_fields_refuse_booleans_by_name(field: str, value: object) -> None:
    data: dict[str, object] = {"rate": 1.0, field: value}
    with pytest.raises(ValidationError) as info:
        _Knobs.model_validate(data)
    (error,) = info.value.errors()
    assert error["loc"] == (field,)
    assert error["msg"] == MESSAGE


def test_other_fields_stay_lax() -> None:
    knobs = _Knobs.model_validate(
        {
            "rate": 2,
            "count": None,
            "chunked": False,
            "sizes": [1, 2],
            "pair": ["x", 3],
            "flag_or_weight": True,
        }
    )
    assert knobs.rate == 2.0 and isinstance(knobs.rate, float)
    assert knobs.sizes == (1, 2) and knobs.chunked is False and knobs.pair == ("x", 3.0)
    assert knobs.flag_or_weight is True  # the union admits bool: kept


def test_finite_models_refuse_nan_and_frozen_models_refuse_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="finite number"):
        _Knobs(rate=float("nan"))
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        _Knobs.model_validate({"rate": 1.0, "rat": 2.0})
    knobs = _Knobs(rate=1.0)
    with pytest.raises(ValidationError, match="frozen"):
        knobs.rate = 2.0  # type: ignore[misc]


def test_a_plain_frozen_model_accepts_infinity() -> None:
    class _Open(FrozenModel):
        limit: float

    assert _Open(limit=float("inf")).limit == float("inf")
