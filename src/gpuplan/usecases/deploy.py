"""Files in, files out: read a plan (recommend JSON, fleet JSON or a fleet YAML to plan), write
the manifests as YAML (``yaml.safe_dump``) and read them back for ``apply``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gpuplan.adapters import yamltext
from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.adapters.k8s.disaggregated import is_disaggregated, render_disaggregated
from gpuplan.adapters.k8s.engine_args import PRE_QUANTIZED_DTYPES, Engine
from gpuplan.adapters.k8s.manifests import Obj, render
from gpuplan.adapters.k8s.pools import PoolDeployment, from_disaggregated_plan, from_fleet, from_plan
from gpuplan.adapters.k8s.validate import schema_available, validate_schema
from gpuplan.adapters.scenario_files.deployment import describe_validation_error
from gpuplan.core import jsontext
from gpuplan.core.errors import FileFormatError, UserInputError
from gpuplan.core.fleet.planner import FleetPlan
from gpuplan.core.fleet.spec import DNS_LABEL
from gpuplan.core.recommend.request import Recommendation
from gpuplan.usecases.fleet import parse_fleet, plan_from_spec


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"cannot read {path}: {exc}", hint="check the path") from None


def _slug(text: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in text.lower())
    return "-".join(p for p in out.split("-") if p)[:40].rstrip("-") or "pool"


def pools_from_file(path: Path, catalog: Catalog, *, max_model_len: int | None) -> list[PoolDeployment]:
    """Recommend JSON (its best plan), fleet JSON (``gpuplan fleet --format json``) or fleet YAML."""
    text = _read(path)
    try:
        doc: Any = jsontext.loads(text)
    except ValueError:
        doc = None
    try:
        if isinstance(doc, dict) and "pools" in doc:
            pools = from_fleet(FleetPlan.model_validate(doc), catalog)
        elif isinstance(doc, dict) and "plans" in doc:
            pools = _from_recommendation(Recommendation.model_validate(doc), catalog, max_model_len)
        elif doc is not None:
            raise FileFormatError(f"{path}: JSON is neither 'gpuplan recommend' nor 'gpuplan fleet' output")
        else:
            pools = from_fleet(plan_from_spec(parse_fleet(text, origin=str(path)), catalog), catalog)
    except ValidationError as exc:
        raise FileFormatError(f"{path}: {describe_validation_error(exc)}") from None
    if not pools:
        raise UserInputError(
            f"{path}: the plan has no pool to deploy", hint="render a plan with at least one pool"
        )
    return pools


def _from_recommendation(
    rec: Recommendation, catalog: Catalog, max_model_len: int | None
) -> list[PoolDeployment]:
    if not rec.plans:
        raise UserInputError("the recommendation has no plan to render")
    recorded = rec.workload.input_tokens + rec.workload.output_tokens if rec.workload else None
    context = max_model_len or recorded
    if context is None:
        raise UserInputError(
            "this recommend plan does not record its request length (written before it did)",
            hint="pass --max-model-len (input + output tokens), or re-run recommend --format json",
        )
    plan, name = rec.plans[0], _slug(rec.model)
    if plan.layout_kind == "disaggregated":
        pools = from_disaggregated_plan(plan, rec.model, catalog, max_model_len=context, name=name)
        transport = plan.kv_transport
        overlapped = transport.overlapped if transport is not None else _kv_overlapped(rec.assumptions)
        return [p.model_copy(update={"kv_overlapped": overlapped}) for p in pools]
    return [from_plan(plan, rec.model, catalog, max_model_len=context, name=name)]


KV_TRANSPORT_ASSUMPTION = "Disaggregated plans: KV cache over "
"""How a recommendation's assumption on the KV transport starts (``_transport_line``,
core/recommend/layout_kinds.py); its transport label ends in ``, overlapped`` when recommend had
``--kv-overlap`` (``KvTransport.label``, core/perf/kv_transfer.py): read in plan files written before
plans carried ``kv_transport``."""
OVERLAPPED_MARK = ", overlapped"


def _kv_overlapped(assumptions: list[str]) -> bool:
    return any(a.startswith(KV_TRANSPORT_ASSUMPTION) and OVERLAPPED_MARK in a for a in assumptions)


def render_warnings(pools: list[PoolDeployment], engine: Engine) -> list[str]:
    """One line per way the manifests run differently from what the plan priced (still valid)."""
    if engine == "vllm" and any(p.kv_overlapped for p in pools):
        return [
            "the plan priced the KV transfer as overlapped with the prefill (--kv-overlap), but vLLM's "
            "NixlConnector sends it after the prefill: expect TTFT above the plan's by up to its kv_transfer_ms"
        ]
    return []


def with_checkpoint(
    pools: list[PoolDeployment], checkpoint: str | None, engine: Engine
) -> list[PoolDeployment]:
    """``pools`` whose weights ``engine`` cannot make at start-up (``PRE_QUANTIZED_DTYPES``) loading
    ``checkpoint`` (``--checkpoint``); a plan of other weights is refused (it would load weights other
    than those the plan was sized on)."""
    if checkpoint is None:
        return pools
    other = sorted({p.layout.weight_dtype.name for p in pools} - PRE_QUANTIZED_DTYPES[engine])
    if other:
        raise UserInputError(
            f"--checkpoint is for pre-quantised weights ({', '.join(sorted(PRE_QUANTIZED_DTYPES[engine]))} on "
            f"{engine}) but the plan uses {', '.join(other)}",
            hint="drop --checkpoint (those weights load from the model's own repo), or plan with --dtypes int4",
        )
    if not checkpoint.strip():
        raise UserInputError(
            "--checkpoint is empty", hint="name a repo id or a path, e.g. --checkpoint org/model-AWQ"
        )
    models = sorted({p.model for p in pools})
    if len(models) > 1:
        raise UserInputError(
            f"--checkpoint names one model's weights but the plan deploys {len(models)}: {', '.join(models)}",
            hint="render one model's pools at a time",
        )
    return [p.model_copy(update={"checkpoint": checkpoint.strip()}) for p in pools]


def render_files(
    pools: list[PoolDeployment], engine: Engine, *, namespace: str, bench_image: str | None
) -> dict[str, list[Obj]]:
    """Objects per file, schema-checked when ``kubernetes-validate`` is installed."""
    if not re.fullmatch(DNS_LABEL, namespace) or len(namespace) > 63:
        raise UserInputError(
            f"--namespace {namespace!r} is not a Kubernetes name (RFC 1123 label: lower-case letters, digits "
            "and '-', at most 63, starting and ending with a letter or digit)",
            hint="e.g. --namespace gpuplan",
        )
    build = render_disaggregated if is_disaggregated(pools) else render
    files = build(pools, engine, ns=namespace, bench_image=bench_image)
    if schema_available():
        validate_schema(obj for objs in files.values() for obj in objs)
    return files


def dump(objs: list[Obj]) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False, default_flow_style=False, width=120)


def write_files(files: dict[str, list[Obj]], out: Path) -> list[Path]:
    """Write every file, or none: all texts are built before the first write."""
    texts = {name: dump(objs) for name, objs in files.items() if objs}
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, text in texts.items():
            (out / name).write_text(text, encoding="utf-8")
            written.append(out / name)
    except OSError as exc:
        raise FileFormatError(f"cannot write manifests to {out}: {exc.strerror}") from None
    return written


def load_manifests(directory: Path) -> list[Obj]:
    """Every object of ``DIR/*.yaml`` / ``*.yml``, in file-name order."""
    if not directory.is_dir():
        raise UserInputError(
            f"{directory} is not a directory", hint="pass the -o DIR of 'gpuplan k8s render'"
        )
    paths = sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])
    if not paths:
        raise UserInputError(f"no *.yaml manifests in {directory}")
    objects: list[Obj] = []
    for p in paths:
        try:
            docs = [d for d in yamltext.safe_load_all(_read(p)) if d is not None]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise FileFormatError(f"{p}{f' line {mark.line + 1}' if mark else ''}: invalid YAML") from None
        for d in docs:
            if not isinstance(d, dict) or "kind" not in d or "apiVersion" not in d:
                raise FileFormatError(f"{p}: a document is not a Kubernetes object (no apiVersion/kind)")
            objects.append(d)
    return objects
