"""The text of ``bench serve``'s compound flags, read into config values: ``--header K:V``, ``--extra-body
JSON``, ``--max-errors 50|5%``, ``--request-rate R|inf``, ``--goodput KEY:MS``, ``--metadata KEY=VALUE``
and the comma lists (``--percentile-metrics``, ``--metric-percentiles``). Each bad value is a one-line
:class:`UserInputError` naming the flag, and never quoting a header's value (it may be a credential)."""

from __future__ import annotations

import math
from typing import Any

from gpuplan.core import jsontext
from gpuplan.core.errors import UserInputError


def headers(items: list[str] | None) -> dict[str, str]:
    """``--header 'NAME: VALUE'`` (curl's form) or ``NAME=VALUE`` (``vllm bench serve``'s), repeatable, as
    a dict; a later NAME wins. A name cannot hold ``:`` or ``=`` (RFC 9110 tokens), so the first of the
    two ends it and the value may hold either."""
    out: dict[str, str] = {}
    for number, item in enumerate(items or (), start=1):
        cuts = [i for i in (item.find(":"), item.find("=")) if i >= 0]
        name = item[: min(cuts)].strip() if cuts else ""
        if not name:
            raise UserInputError(
                f"--header number {number} is not NAME:VALUE or NAME=VALUE",
                hint="e.g. --header 'X-Request-Source: bench'",
            )
        out[name] = item[min(cuts) + 1 :].strip()
    return out


def extra_body(text: str | None) -> dict[str, Any]:
    """``--extra-body '{"min_tokens": 8}'``: a JSON object merged into every request body."""
    if text is None:
        return {}
    try:
        value = jsontext.loads(text)
    except ValueError as exc:
        raise UserInputError(
            f"--extra-body is not JSON ({exc})", hint="e.g. --extra-body '{\"seed\": 1}'"
        ) from None
    if not isinstance(value, dict):
        raise UserInputError(f"--extra-body must be a JSON object, got a {type(value).__name__}")
    return value


def max_errors(text: str | None) -> tuple[int | None, float | None]:
    """``--max-errors 50`` (a count) or ``5%`` (a share of the finished requests) as (count, share)."""
    if text is None:
        return None, None
    raw = text.strip()
    try:
        if raw.endswith("%"):
            share = float(raw[:-1]) / 100.0
            if not 0.0 < share <= 1.0 or not math.isfinite(share):
                raise ValueError
            return None, share
        count = int(raw)
        if count < 1:
            raise ValueError
        return count, None
    except ValueError:
        raise UserInputError(
            f"--max-errors {text!r} must be a whole number >= 1 or a share in (0%, 100%]",
            hint="e.g. --max-errors 50 or --max-errors 5%",
        ) from None


def request_rate(rate: float | None, request_rate_text: str | None) -> tuple[float | None, bool]:
    """``--rate R`` or vLLM's ``--request-rate R|inf`` as (rate_rps, all at once)."""
    if request_rate_text is None:
        return rate, False
    if rate is not None:
        raise UserInputError("give --rate or --request-rate, not both (--request-rate is its vLLM name)")
    raw = request_rate_text.strip().lower()
    if raw in ("inf", "infinity"):
        return None, True
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UserInputError(
            f"--request-rate {request_rate_text!r} must be a number > 0 or inf", hint="e.g. --request-rate 20"
        )
    return value, False


GOODPUT_KEYS = {"ttft": "slo_ttft_ms", "tpot": "slo_tpot_ms", "e2el": "slo_e2el_ms"}
"""``--goodput KEY:MS`` keys, as ``vllm bench serve`` has them, and the config limit each sets."""


def goodput(items: list[str] | None) -> dict[str, float]:
    """``--goodput 'ttft:500 tpot:50'`` (vLLM's space-separated pairs in one value) or repeated
    ``--goodput e2el:2000``: the config's limits (``slo_*_ms``), in ms."""
    limits: dict[str, float] = {}
    for pair in " ".join(items or ()).replace(",", " ").split():
        key, _, value = pair.partition(":")
        try:
            limit_ms = float(value)
        except ValueError:
            limit_ms = math.nan
        if key not in GOODPUT_KEYS or not math.isfinite(limit_ms) or limit_ms <= 0:
            raise UserInputError(
                f"--goodput {pair!r} must be KEY:MS with KEY ttft, tpot or e2el and MS > 0",
                hint="e.g. --goodput 'ttft:500 tpot:50 e2el:2000'",
            )
        limits[GOODPUT_KEYS[key]] = limit_ms
    return limits


def metadata(items: list[str] | None) -> dict[str, str]:
    """``--metadata KEY=VALUE`` (repeatable; vLLM's form) as a dict; a later KEY wins."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserInputError(f"--metadata {item[:60]!r} is not KEY=VALUE", hint="e.g. --metadata tp=2")
        out[key.strip()] = value.strip()
    return out


def comma_list(flag: str, text: str | None) -> list[str] | None:
    """``a,b,c`` as its non-empty items (None when the flag is not given)."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise UserInputError(
            f"{flag} is empty",
            hint=f"e.g. {flag} " + ("ttft,tpot,itl,e2el" if "metrics" in flag else "50,90,99"),
        )
    return items


OTHER_PROFILES = {
    "synchronous": "--concurrency 1",
    "concurrent": "--concurrency N",
    "throughput": "--request-rate inf --num-prompts N [--max-concurrency C]",
    "constant": "--rate R --arrival constant",
    "poisson": "--rate R",
}
"""GuideLLM's other ``--profile`` values and the flags that make the same load here."""


def sweep_size(profile: str | None, rate_rps: float | None, all_at_once: bool) -> int | None:
    """``--profile sweep [--rate N]`` (GuideLLM's: ``--rate`` is then the number of levels, default
    :data:`sweep_profile.DEFAULT_SWEEP_SIZE`) as that number; None without ``--profile``."""
    from gpuplan.adapters.bench.load import sweep_profile

    if profile is None:
        return None
    name = profile.strip().lower()
    if name != "sweep":
        instead = OTHER_PROFILES.get(name)
        raise UserInputError(
            f"--profile {profile!r}: the only profile is sweep"
            + (f"; GuideLLM's {name} is {instead} here" if instead else ""),
            hint="e.g. --profile sweep --rate 8",
        )
    if all_at_once:
        raise UserInputError("--profile sweep finds the saturation rate itself: drop --request-rate inf")
    if rate_rps is None:
        return sweep_profile.DEFAULT_SWEEP_SIZE
    low, high = sweep_profile.MIN_SWEEP_SIZE, sweep_profile.MAX_SWEEP_SIZE
    if rate_rps != int(rate_rps) or not low <= rate_rps <= high:
        raise UserInputError(
            f"--rate {rate_rps:g} with --profile sweep is the number of levels (GuideLLM's), "
            f"a whole number from {low} to {high}",
            hint="e.g. --profile sweep --rate 8",
        )
    return int(rate_rps)
