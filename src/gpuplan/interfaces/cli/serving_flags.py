"""``recommend``'s serving flags: as given, and as the scenario document they describe."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any

import typer

from gpuplan.adapters.scenario_files.deployment import ScenarioFile
from gpuplan.core.errors import UserInputError
from gpuplan.usecases import resolve

LayoutsOpt = Annotated[
    str | None,
    typer.Option(help="plan kinds: aggregated,disaggregated [default: both where the engine has it]"),
]
KvTransportOpt = Annotated[
    str | None, typer.Option(help="disaggregated plans' KV-cache link: rdma, nvlink or tcp [default: rdma]")
]
KvGbpsOpt = Annotated[float | None, typer.Option(help="KV link Gb/s per GPU [default: by --kv-transport]")]
KvOverlapOpt = Annotated[bool, typer.Option(help="KV transfer overlapped with the prefill (layer-wise)")]
MixedPoolsOpt = Annotated[
    bool, typer.Option(help="disaggregated pools may use different GPU types (one vendor)")
]
MethodOpt = Annotated[str | None, typer.Option(help="train/finetune: full | lora | qlora [default: full]")]
SeqLenOpt = Annotated[int | None, typer.Option(help="train/finetune: tokens per sequence")]
TokensOpt = Annotated[float | None, typer.Option(help="train/finetune: tokens to train on")]
GlobalBatchOpt = Annotated[int | None, typer.Option(help="train/finetune: sequences per step [default: 256]")]


@dataclass(frozen=True)
class ServingFlags:
    """``recommend``'s flags of a serving request, as given (None: not given)."""

    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    rate: float | None
    concurrency: int | None
    ttft_ms: float | None
    tpot_ms: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    gpus: str | None
    max_gpus: int
    dtypes: str
    engine: str
    objective: str
    budget: float | None
    confidence: float | None = None
    """Not part of the request document (a file takes it too), but a training request refuses it."""
    layouts: str | None = None
    kv_transport: str | None = None
    kv_gbps: float | None = None
    kv_overlap: bool = False
    mixed_pools: bool = False
    features: resolve.DeploymentFeatures = field(default_factory=resolve.DeploymentFeatures)

    @classmethod
    def of(cls, given: Mapping[str, Any], **extra: Any) -> ServingFlags:
        """The flags of this class's names among a command's parameters (``locals()``), ``extra`` those
        built from several parameters (``features``)."""
        return cls(**{f.name: given[f.name] for f in fields(cls) if f.name not in extra}, **extra)

    def without_defaults(self) -> dict[str, object]:
        """The flags that have no default (so a value means the user gave it), in order; a switch
        (--kv-overlap, --mixed-pools) when it is on (None when off: not given)."""
        defaulted = ("max_gpus", "dtypes", "engine", "objective", "confidence", "features")
        given = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in defaulted}
        switches = {k: (v or None) if k in ("kv_overlap", "mixed_pools") else v for k, v in given.items()}
        return switches | self.features.given()


SERVING_REQUEST = (
    " by a serving request (they are --task train|finetune flags)",
    "drop them, or add --task train",
)
TRAIN_GLOBAL_BATCH = 256
"""``recommend --task train``'s sequences per optimizer step when ``--global-batch`` is not given."""
DOCUMENT_IS_THE_REQUEST = (
    ": a scenario file (or --example) is the whole request",
    "put the values in the file, or drop the file and use flags only",
)
_SERVING = (
    "input_tokens output_tokens rate concurrency ttft_ms tpot_ms ttft_p99_ms tpot_p99_ms budget confidence "
    "layouts kv_transport kv_gbps"
)
SERVING_ONLY = tuple(_SERVING.split())  # the flags a training request refuses, in order
TRAINING_FLAGS = "training plans take --model, --method, --seq-len, --tokens, --gpus, --max-gpus, --objective"


def scenario_from_flags(f: ServingFlags) -> ScenarioFile:
    """The scenario document the recommend flags describe, validated like a file."""
    # 0 tokens is not refused here: the document's field check names it
    if not (f.model and f.input_tokens is not None and f.output_tokens is not None):
        raise UserInputError(
            "recommend needs a scenario file, --example, or --model, --input-tokens and "
            "--output-tokens with --rate or --concurrency"
        )
    for flag, text in (("--gpus", f.gpus), ("--dtypes", f.dtypes), ("--layouts", f.layouts)):
        if text is not None and not any(part.strip() for part in text.split(",")):
            raise UserInputError(f"{flag} {text!r} names nothing", hint=f"leave {flag} out for the default")
    doc = {
        "model": f.model,
        "engine": f.engine,
        "objective": f.objective,
        "workload": {
            "input_tokens": f.input_tokens,
            "output_tokens": f.output_tokens,
            "rate_rps": f.rate,
            "concurrency": f.concurrency,
        },
        "sla": {
            "ttft_ms": f.ttft_ms,
            "tpot_ms": f.tpot_ms,
            "ttft_p99_ms": f.ttft_p99_ms,
            "tpot_p99_ms": f.tpot_p99_ms,
        },
        "hardware": {
            "gpus": [g.strip() for g in f.gpus.split(",") if g.strip()] if f.gpus else None,
            "max_gpus": f.max_gpus,
        },
        "precision": {"allowed": [d.strip() for d in f.dtypes.split(",") if d.strip()]},
        "prices": {"max_usd_per_hour": f.budget},
        "layouts": _layouts_section(f),
    }
    return resolve.scenario_from_mapping(resolve.features_into(doc, f.features), names=RECOMMEND_FLAG_FIELDS)


def _layouts_section(f: ServingFlags) -> dict[str, object]:
    """The document's ``layouts:`` from --layouts and the --kv-* flags (defaults where not given)."""
    section: dict[str, object] = {}
    if f.layouts is not None:
        section["kinds"] = [k.strip() for k in f.layouts.split(",") if k.strip()]
    transport = {"kind": f.kv_transport, "gbps_per_gpu": f.kv_gbps, "overlapped": f.kv_overlap or None}
    given = {k: v for k, v in transport.items() if v is not None}
    if given:
        section["kv_transport"] = given
    if f.mixed_pools:
        section["mixed_pools"] = True
    return section


RECOMMEND_FLAG_FIELDS = {
    "model": "--model",
    "engine": "--engine",
    "objective": "--objective",
    "workload.input_tokens": "--input-tokens",
    "workload.output_tokens": "--output-tokens",
    "workload.rate_rps": "--rate",
    "workload.concurrency": "--concurrency",
    **{
        f"sla.{limit}": f"--{limit.replace('_', '-')}"
        for limit in ("ttft_ms", "tpot_ms", "ttft_p99_ms", "tpot_p99_ms")
    },
    "hardware.gpus": "--gpus",
    "hardware.max_gpus": "--max-gpus",
    "precision.allowed": "--dtypes",
    "prices.max_usd_per_hour": "--budget",
    "layouts.kinds": "--layouts",
    "layouts.kv_transport.kind": "--kv-transport",
    "layouts.kv_transport.gbps_per_gpu": "--kv-gbps",
    "layouts.kv_transport.overlapped": "--kv-overlap",
    "layouts.mixed_pools": "--mixed-pools",
    **resolve.FEATURE_FLAG_FIELDS,
}
"""The scenario field each ``recommend`` flag fills: an error names the flag the user typed."""
