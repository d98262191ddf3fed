"""Serving-engine release lines: the same engine runs measurably differently across its versions.

A release line is a range of an engine's versions that schedule and price a step alike. What the
line changes is fitted as few named factors per line (``ReleaseFactors`` in ``Calibration.release_lines``, fitted by
``scripts/fit_release_lines.py`` on the light-load points of the load sweeps, each with its
provenance), never per row:

* ``efficiency``: the line's kernels and scheduler on every model, relative to its engine's fitted
  ``engine_efficiency`` (vLLM's V1 engine against the V0 releases that ``inference.csv`` measured);
* ``mla_moe_efficiency``: the math rate (GEMM and attention FLOP/s, not weight streaming) of models
  with multi-head latent attention and fine-grained MoE (DeepSeek-V2/V3 and their like), whose
  block-FP8 grouped GEMMs and MLA kernels were young in early-2025 lines
  (vLLM 0.7 ran block-FP8 through Triton; SGLang 0.4 and TensorRT-LLM's PyTorch flow 0.17 likewise);
* ``mla_moe_layer_step_s``: for those models, host time per transformer layer of every step (eager
  kernel launches where the line did not capture CUDA graphs for them, Python scheduling), so a step
  pays ``layers × mla_moe_layer_step_s`` on top of its roofline.

A version the table does not know reads as the engine's newest line. No version at all (a Layout
without ``engine_version``, the default of ``predict`` and ``recommend``) keeps the engine's own factors,
fitted on ``inference.csv`` (``core/perf/roofline.py``): a user names the version they run to get its
line's factors.
"""

from __future__ import annotations

import re

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf.engine_profiles import VLLM_V1_DEFAULT, EngineProfile, parse_version, schedules_ahead
from gpuplan.core.perf.layout import Layout

Version = tuple[int, int]
OPEN: Version = (1_000, 0)
"""Upper bound of an open (current) release line."""
NEWEST: Version = (999, 0)
"""What an unstated or unknown version reads as: inside every open line."""


class ReleaseLine(FrozenModel):
    """Versions ``[first, until)`` of one engine."""

    name: str
    engine: str
    first: Version
    until: Version
    source: str


_V080 = "https://github.com/vllm-project/vllm/releases/tag/v0.8.0 (V1 engine on by default from 0.8.0)"
_LINES: tuple[tuple[str, str, Version, Version, str], ...] = (
    # name, engine, first version, until (exclusive), source
    ("vllm-v0", "vllm", (0, 0), VLLM_V1_DEFAULT, _V080),
    ("vllm-v1", "vllm", VLLM_V1_DEFAULT, OPEN, _V080),
    ("sglang-0.4", "sglang", (0, 0), (0, 5), "https://github.com/sgl-project/sglang/releases/tag/v0.4.3.post2"),
    ("sglang", "sglang", (0, 5), OPEN, "https://github.com/sgl-project/sglang/releases/tag/v0.5.0"),
    ("trtllm-0.x", "trtllm", (0, 0), (1, 0),
     "https://github.com/NVIDIA/TensorRT-LLM/releases/tag/v0.17.0 (PyTorch flow experimental)"),
    ("trtllm", "trtllm", (1, 0), OPEN, "https://github.com/NVIDIA/TensorRT-LLM/releases/tag/v1.0.0"),
)  # fmt: skip
RELEASE_LINES: tuple[ReleaseLine, ...] = tuple(
    ReleaseLine(name=name, engine=engine, first=first, until=until, source=source)
    for name, engine, first, until, source in _LINES
)
"""Every engine's release lines, oldest first."""

_YEAR = re.compile(r"\b(20\d\d)-\d\d")
OLDEST: Version = (0, 0)
LAST_V0_YEAR = 2024
"""A version given only as a dated commit of 2024 or before predates every engine's newest line."""


def version_of(raw: str | None) -> Version:
    """``parse_version``'s (major, minor) ('0.7.4.dev181+g…' → (0, 7), 'v0', 'v1'); a dated commit of
    ``LAST_V0_YEAR`` or before → (0, 0); anything else (unstated, unknown) → newest."""
    parsed = parse_version(raw)
    if parsed is not None:
        return parsed
    year = _YEAR.search(raw or "")
    return OLDEST if year and int(year.group(1)) <= LAST_V0_YEAR else NEWEST


def check_engine_version(raw: str) -> str:
    """A version a user states (``0.14.1``, ``v0.8.3``, ``0.7.4.dev181+gf35f8e22``), stripped; ValueError
    for text that names no major.minor (an unknown version would silently read as the newest line)."""
    text = raw.strip()
    if parse_version(text) is None:
        raise ValueError(f"{raw!r} is not an engine version: give major.minor[.patch], e.g. 0.14.1 or v0.8.3")
    return text


def release_line(engine: str, version: str | None) -> ReleaseLine | None:
    """The engine's line holding ``version`` (None for engines without lines)."""
    at = version_of(version)
    for line in RELEASE_LINES:
        if line.engine == engine and line.first <= at < line.until:
            return line
    return None


def is_mla_moe(model: ModelSpec) -> bool:
    """Multi-head latent attention with routed experts (the DeepSeek-V2/V3 family)."""
    return model.mla is not None and model.moe is not None


def release_terms(model: ModelSpec, layout: Layout, cal: Calibration) -> tuple[float, float, float, float]:
    """(engine efficiency, math efficiency, host s per layer per step, host s per request) of the
    layout's engine and release line; MLA + MoE models take the line's young-kernel factors too."""
    release = cal.release(line_name(layout.engine.name, layout.engine_version))
    eng = cal.engine(layout.engine.name) * release.efficiency
    if not is_mla_moe(model):
        return eng, eng, 0.0, release.first_token_host_s
    host_s = release.first_token_host_s + release.mla_moe_first_token_host_s
    return eng, eng * release.mla_moe_efficiency, release.mla_moe_layer_step_s, host_s


def line_name(engine: str, version: str | None) -> str | None:
    """The release line whose factors a step model reads: only a version the layout names picks one
    (an unstated version runs at the engine's own factors, fitted on ``inference.csv``)."""
    if version is None:
        return None
    line = release_line(engine, version)
    return line.name if line is not None else None


def host_step_s(overhead_s: float, engine: EngineProfile, version: str | None) -> float:
    """The engine's per-step host time (scheduling, input preparation) that the GPU waits for: all of
    it for a synchronous scheduler, none where the release plans each step while the previous one runs
    (vLLM's async scheduling "helps to avoid gaps in GPU utilization", ``SchedulerConfig.async_scheduling``
    docstring, https://github.com/vllm-project/vllm/pull/32775), as long as a step outlasts its planning."""
    return 0.0 if schedules_ahead(engine, version) else overhead_s
