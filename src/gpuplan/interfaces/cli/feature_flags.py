"""Serving options shared or kept apart from ``commands.py``: recommend's P99 limits, and the
deployment-feature flags ``predict``, ``simulate`` and ``recommend`` share: speculative decoding and
prefix caching (docs/model.md §7; the values go into the scenario's ``speculative:`` section and
``workload.prefix_cache_hit_rate``, ``usecases/resolve.py``)."""

from __future__ import annotations

from typing import Annotated

import typer

TtftP99Opt = Annotated[float | None, typer.Option(help="P99 TTFT limit, ms (sized by simulation)")]
TpotP99Opt = Annotated[float | None, typer.Option(help="P99 TPOT limit, ms (sized by simulation)")]
SpecMethodOpt = Annotated[
    str | None,
    typer.Option("--spec-method", help="speculative decoding: draft, mtp, eagle or ngram [default: off]"),
]
SpecTokensOpt = Annotated[
    int | None, typer.Option("--spec-tokens", help="tokens drafted per step, k [default: the method's]")
]
SpecAcceptanceOpt = Annotated[
    float | None,
    typer.Option(
        "--spec-acceptance", help="acceptance rate per drafted token, in (0, 1) [default: the method's]"
    ),
]
DraftModelOpt = Annotated[
    str | None,
    typer.Option(
        "--draft-model", help="the draft model of --spec-method draft (HF id, bundled id or config.json)"
    ),
]
PrefixHitRateOpt = Annotated[
    float | None,
    typer.Option(
        "--prefix-hit-rate", help="share of each prompt found in the prefix cache, in [0, 1) [default: 0]"
    ),
]
EngineVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-version",
        help="the engine release you run, e.g. 0.14.1: its release line's factors and scheduling "
        "[default: the engine's own factors]",
    ),
]
