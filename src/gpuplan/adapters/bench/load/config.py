"""What one serving load test does: target, load profile, workload, goodput limits (frozen, validated)."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import (
    Field,
    FieldSerializationInfo,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticKnownError

from gpuplan.core.errors import UserInputError
from gpuplan.core.frozen import FrozenModel
from gpuplan.core.redact import MASK, redact_headers
from gpuplan.core.sla import MAX_TPOT_MS, MAX_TTFT_MS, Sla

MAX_RATE_RPS = 100_000.0
"""Sanity cap on the offered rate: one client process holds about 1,000 req/s on 2 cores
(docs/bench.md); a larger number is a typo, and would build a schedule of billions of requests."""
MAX_CONCURRENCY = 100_000
"""Sanity cap on closed-loop clients (each is a coroutine and a connection)."""
MAX_NUM_PROMPTS = 10_000_000
"""The most requests ``--num-prompts`` may ask for (the default bound of ``max_requests``)."""
MAX_TEMPERATURE = 2.0
"""OpenAI's range for ``temperature`` is 0 to 2 (https://platform.openai.com/docs/api-reference/completions/create)."""
Arrival = Literal["poisson", "constant", "gamma"]
Api = Literal["completions", "chat"]
Dataset = Literal["random", "sharegpt", "prefix_repetition", "hf"]
PercentileMetric = Literal["ttft", "tpot", "itl", "e2el"]
"""``--percentile-metrics`` names, as ``vllm bench serve`` has them (e2el: end-to-end latency)."""
DEFAULT_PERCENTILE_METRICS: tuple[PercentileMetric, ...] = ("ttft", "tpot", "itl")
"""vLLM's default for generative models (https://docs.vllm.ai/en/latest/cli/bench/serve/)."""
DEFAULT_METRIC_PERCENTILES = (99.0,)
"""vLLM's default ``--metric-percentiles`` ("99")."""
MAX_METADATA_ITEMS = 64
"""``--metadata`` pairs a run may carry (they are labels, not data)."""
REVEAL_SECRETS = "reveal_secrets"
"""Serialization context key: dump ``api_key`` and secret header values as they are. Only the hand-over of
a config to a worker process uses it; every other dump (the store, JSON output) leaves the key out and
masks the secret headers, so a secret is never stored or printed."""
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
"""An HTTP field name: a ``token`` of RFC 9110 section 5.1 (https://www.rfc-editor.org/rfc/rfc9110#section-5.1)."""
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")
"""Characters an HTTP field value may not hold (RFC 9110 section 5.5: CR and LF would inject headers), and
any beyond Latin-1, which HTTP/1.1 cannot carry as they are."""
STORED_RUN = "stored_run"
"""Validation context key of a config read back from the store (:meth:`LoadConfig.from_stored`)."""
GOODPUT_CAPS_MS = {"slo_ttft_ms": MAX_TTFT_MS, "slo_tpot_ms": MAX_TPOT_MS}
"""The goodput limits' caps: the ``Sla`` caps of the TTFT and TPOT limits they become."""


METRICS_INTERVAL_S = 1.0
"""Default scrape period of the server's /metrics during a run: one second resolves a minute-long run's
ramp in 60 points; a scrape costs the client ~1–2 ms of CPU (httpx fetch and parse)."""


class LoadConfig(FrozenModel):
    """One run of ``gpuplan bench serve``: an open-loop ``rate_rps``, a closed-loop ``concurrency`` or a
    ``trace_path`` replayed open loop (the simulator's trace format: arrival_s, input_tokens, output_tokens)."""

    url: str = Field(description="server base, http://host:port")
    model: str
    api: Api = "completions"
    rate_rps: float | None = Field(default=None, gt=0, le=MAX_RATE_RPS, allow_inf_nan=False)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0, description="gamma shape k; 1 is Poisson, < 1 burstier")
    duration_s: float = Field(gt=0, le=86_400, allow_inf_nan=False)
    warmup_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    input_tokens: int = Field(ge=1, le=1_000_000)
    output_tokens: int = Field(ge=1, le=1_000_000)
    seed: int = 0
    request_timeout_s: float = Field(default=60.0, gt=0)
    slo_ttft_ms: float | None = Field(
        default=None, gt=0, description="goodput: TTFT from the scheduled send within this"
    )
    slo_tpot_ms: float | None = Field(default=None, gt=0, description="goodput: TPOT within this")
    max_requests: int = Field(default=10_000_000, ge=1, description="hard bound on requests sent")
    trace_path: str | None = Field(default=None, description="CSV/JSONL trace replayed open loop")
    prompts_path: str | None = Field(default=None, description="JSONL prompts, used in turn")
    workers: int = Field(default=1, ge=1, le=64, description="client processes sharing the schedule")
    metrics_url: str | None = Field(
        default=None, description="Prometheus /metrics scraped before, during and after the run"
    )
    metrics_interval_s: float = Field(
        default=METRICS_INTERVAL_S,
        ge=0.05,
        le=3600,
        allow_inf_nan=False,
        description="scrape period during the run",
    )
    api_key: str | None = Field(
        default=None, repr=False, description="sent as Authorization: Bearer; never stored or printed"
    )
    headers: dict[str, str] = Field(default_factory=dict, repr=False, description="extra request headers")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="merged into every request body")
    temperature: float = Field(default=0.0, ge=0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    top_p: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    top_k: int | None = Field(default=None, ge=-1, description="vLLM: -1 (or 0) disables top-k")
    ignore_eos: bool = True
    max_errors: int | None = Field(default=None, ge=1, description="stop after this many failed requests")
    max_error_share: float | None = Field(
        default=None, gt=0, le=1, description="stop once this share of finished requests failed"
    )
    num_prompts: int | None = Field(default=None, ge=1, le=MAX_NUM_PROMPTS, description="count-bounded run")
    all_at_once: bool = Field(default=False, description="--request-rate inf: every request at time 0")
    max_concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY, description="open loop: most requests in flight"
    )
    range_ratio: float = Field(default=0.0, ge=0, lt=1, description="lengths uniform in L(1 ± r)")
    dataset: Dataset = "random"
    dataset_path: str | None = Field(
        default=None, description="ShareGPT-format JSON (sharegpt) or a local Hugging Face dataset (hf)"
    )
    hf_split: str | None = Field(default=None, min_length=1, description="hf: the split (vLLM's --hf-split)")
    hf_subset: str | None = Field(
        default=None, min_length=1, description="hf: the config's folder (--hf-subset)"
    )
    hf_output_len: int | None = Field(
        default=None, ge=1, le=1_000_000, description="hf: max_tokens of every request (--hf-output-len)"
    )
    prefix_len: int = Field(default=256, ge=1, le=1_000_000, description="prefix_repetition: shared words")
    num_prefixes: int = Field(
        default=10, ge=1, le=100_000, description="prefix_repetition: distinct prefixes"
    )
    slo_e2el_ms: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="goodput: E2E latency from the scheduled send"
    )
    percentile_metrics: tuple[PercentileMetric, ...] = Field(default=DEFAULT_PERCENTILE_METRICS, min_length=1)
    metric_percentiles: tuple[float, ...] = Field(default=DEFAULT_METRIC_PERCENTILES, min_length=1)
    label: str | None = Field(default=None, max_length=200, description="a name for the run (vLLM's --label)")
    metadata: dict[str, str] = Field(default_factory=dict, description="KEY=VALUE pairs stored with the run")
    gpu: str | None = Field(default=None, description="the server's GPU (catalog id), recorded with the run")
    engine: str | None = Field(default=None, description="the server's engine; default: read from the server")
    engine_version: str | None = Field(default=None, description="default: read from the server (vLLM)")
    tp: int | None = Field(default=None, ge=1, description="the server's tensor-parallel degree")

    @classmethod
    def from_stored(cls, data: Any) -> LoadConfig:
        """A stored run's config, read back as it was stored: every rule but the goodput limits' caps
        applies (a run stored before the caps may hold a larger limit, and must still resume)."""
        return cls.model_validate(data, context={STORED_RUN: True})

    @field_validator("slo_ttft_ms", "slo_tpot_ms")
    @classmethod
    def _within_cap(cls, limit_ms: float | None, info: ValidationInfo) -> float | None:
        """The ``Sla`` caps, in pydantic's own words, for every config but a stored one."""
        cap_ms = GOODPUT_CAPS_MS[str(info.field_name)]
        if limit_ms is not None and limit_ms > cap_ms and not (info.context or {}).get(STORED_RUN):
            raise PydanticKnownError("less_than_equal", {"le": cap_ms})
        return limit_ms

    @field_serializer("api_key")
    def _key_left_out(self, key: str | None, info: FieldSerializationInfo) -> str | None:
        return key if (info.context or {}).get(REVEAL_SECRETS) else None

    @field_serializer("headers")
    def _headers_masked(self, headers: dict[str, str], info: FieldSerializationInfo) -> dict[str, str]:
        return dict(headers) if (info.context or {}).get(REVEAL_SECRETS) else redact_headers(headers)

    @model_validator(mode="after")
    def _consistent(self) -> LoadConfig:
        self._check_profile()
        self._check_workload()
        self._check_headers()
        for flag, url in (("--url", self.url), ("--metrics-url", self.metrics_url)):
            if url is None:
                continue
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{flag} {url!r} must start with http:// or https://")
            try:
                httpx.URL(url)
            except httpx.InvalidURL as exc:
                raise ValueError(f"{flag} {url!r} is not a valid URL ({exc})") from None
        return self

    def _check_profile(self) -> None:
        profiles = (self.rate_rps, self.concurrency, self.trace_path, self.all_at_once or None)
        if sum(p is not None for p in profiles) != 1:
            raise ValueError("give exactly one of --rate (--request-rate), --concurrency or --trace")
        if self.all_at_once and self.num_prompts is None:
            raise ValueError("--request-rate inf needs --num-prompts (how many requests to send at once)")
        if self.all_at_once and self.warmup_s > 0:
            raise ValueError("--warmup cannot be used with --request-rate inf (every request is sent at 0 s)")
        if self.max_concurrency is not None and not self.open_loop:
            raise ValueError(
                "--max-concurrency caps an open loop (--rate or --request-rate inf); "
                "a closed loop is --concurrency alone"
            )

    def _check_workload(self) -> None:
        """The dataset and its files, the percentiles and the metadata."""
        if (self.dataset in ("sharegpt", "hf")) != (self.dataset_path is not None):
            raise ValueError(
                "--dataset-name sharegpt (FILE.json) and hf (a local dataset folder) need --dataset-path, "
                "and only they take one"
            )
        hf_flags = (self.hf_split, self.hf_subset, self.hf_output_len)
        if self.dataset != "hf" and any(v is not None for v in hf_flags):
            raise ValueError("--hf-split, --hf-subset and --hf-output-len go with --dataset-name hf")
        if self.dataset_path is not None and self.prompts_path is not None:
            raise ValueError("give --prompts or --dataset-path, not both")
        if self.dataset == "prefix_repetition" and (self.prompts_path or self.trace_path):
            raise ValueError(
                "--dataset-name prefix_repetition builds its own prompts (not --prompts or a trace)"
            )
        if any(not 0 < p <= 100 for p in self.metric_percentiles):
            raise ValueError("--metric-percentiles must each lie in (0, 100], e.g. 50,90,99")
        if len(self.metadata) > MAX_METADATA_ITEMS:
            raise ValueError(f"--metadata holds at most {MAX_METADATA_ITEMS} KEY=VALUE pairs")
        if self.range_ratio > 0 and (self.dataset != "random" or self.prompts_path or self.trace_path):
            raise ValueError(
                "--random-range-ratio varies synthetic prompts only (not --prompts, a trace or sharegpt)"
            )

    def _check_headers(self) -> None:
        """Header names and values (and the key) that are valid on the wire; a message never shows a value."""
        for name, value in self.headers.items():
            if not _TOKEN.match(name):
                raise ValueError(f"--header name {name[:40]!r} is not a valid HTTP header name")
            if _BAD_VALUE.search(value):
                raise ValueError(f"--header {name}: its value holds a control or non-Latin-1 character")
        if self.api_key is not None and (not self.api_key or _BAD_VALUE.search(self.api_key)):
            raise ValueError(
                "--api-key (or OPENAI_API_KEY) is empty or holds a control or non-Latin-1 character"
            )

    def resumed_with(self, *, api_key: str | None, headers: dict[str, str]) -> LoadConfig:
        """A stored config with the secrets given again to resume it: the key (never stored) and the
        ``--header`` values (a secret one is stored masked); a masked header not given again is refused."""
        merged = self.headers | headers
        masked = [name for name, value in merged.items() if value == MASK]
        if masked:
            raise UserInputError(
                f"the run was started with the secret header {masked[0]}, stored masked",
                hint=f"give it again to resume: --header '{masked[0]}: VALUE'",
            )
        data = self.model_dump(context={REVEAL_SECRETS: True}) | {
            "api_key": api_key or self.api_key,
            "headers": merged,
        }
        return LoadConfig.from_stored(data)

    def http_headers(self) -> dict[str, str]:
        """Every header the requests carry besides the framing ones: ``Authorization: Bearer`` (the key), then
        ``--header`` values (which win, as the user wrote them last)."""
        auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return auth | dict(self.headers)

    def secrets(self) -> tuple[str, ...]:
        """The secret strings of this config (the key, secret header values), to mask in messages."""
        masked = redact_headers(self.http_headers())
        values = [v for k, v in self.http_headers().items() if v and masked[k] != v]
        tokens = [
            v.split(None, 1)[1] for v in values if len(v.split(None, 1)) == 2
        ]  # "Bearer TOKEN": TOKEN too
        found = (*values, *tokens, self.api_key) if self.api_key else (*values, *tokens)
        return tuple(dict.fromkeys(found))

    @property
    def goodput_sla(self) -> Sla:
        """``--slo-ttft-ms``/``--slo-tpot-ms`` as an SLA: per-request limits, so its P99 limits (a
        request counts towards goodput when its own TTFT and TPOT are within them, as in ``simulate``'s
        goodput, docs/metrics.md). The run config keeps the flat fields: they are the stored and
        ``bench serve --format json`` shape. As recorded (:meth:`Sla.as_recorded`): a stored run
        keeps the limits it began with."""
        return Sla.as_recorded(ttft_p99_ms=self.slo_ttft_ms, tpot_p99_ms=self.slo_tpot_ms)

    @property
    def open_loop(self) -> bool:
        return self.concurrency is None

    @property
    def mode(self) -> str:
        """``rate``, ``concurrency``, ``trace`` or ``burst`` (``--request-rate inf``)."""
        if self.trace_path is not None:
            return "trace"
        if self.all_at_once:
            return "burst"
        return "rate" if self.rate_rps is not None else "concurrency"

    @property
    def path(self) -> str:
        """The request path, under the URL's own path prefix if it has one."""
        return urlsplit(self.url).path.rstrip("/") + (
            "/v1/completions" if self.api == "completions" else "/v1/chat/completions"
        )

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + self.path.removeprefix(urlsplit(self.url).path.rstrip("/"))
