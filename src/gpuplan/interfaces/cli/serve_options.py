"""The option types of ``gpuplan bench serve`` (names beside ``vllm bench serve``'s: docs/bench.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RateOpt = Annotated[
    float | None, typer.Option(help="open loop: requests/s (start rate of --max-rate-under-slo)")
]
TraceOpt = Annotated[
    Path | None, typer.Option(help="replay a trace (CSV/JSONL: arrival_s, input_tokens, output_tokens)")
]
SearchOpt = Annotated[
    bool,
    typer.Option(
        "--max-rate-under-slo", help="search the highest rate meeting --slo-ttft-p99-ms/--slo-tpot-p99-ms"
    ),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile",
        "--rate-type",
        help="sweep: GuideLLM's sweep (one at a time, saturation, then rates between; --rate N = levels, default 10)",
    ),
]
DurationOpt = Annotated[
    float | None,
    typer.Option(
        help="measured seconds after warm-up (default 30; a trace: its span; --num-prompts: unbounded)"
    ),
]
PromptsOpt = Annotated[Path | None, typer.Option(help='JSONL prompts ({"prompt": ...} per line), in turn')]
ScrapeOpt = Annotated[
    bool, typer.Option("--scrape-metrics", help="scrape URL/metrics before, during and after the run")
]
MetricsUrlOpt = Annotated[str | None, typer.Option(help="Prometheus endpoint to scrape (implies scraping)")]
MetricsIntervalOpt = Annotated[
    float, typer.Option("--metrics-interval-s", help="seconds between scrapes during the run")
]
ProgressOpt = Annotated[
    bool | None,
    typer.Option(
        "--progress/--no-progress", help="progress bar on stderr (default: when stderr is a terminal)"
    ),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        envvar="OPENAI_API_KEY", show_default=False, help="sent as Authorization: Bearer; never stored"
    ),
]
HeaderOpt = Annotated[
    list[str] | None, typer.Option("--header", help="extra header 'NAME: VALUE' or NAME=VALUE (repeatable)")
]
ExtraBodyOpt = Annotated[str | None, typer.Option(help="JSON object merged into every request body")]
TemperatureOpt = Annotated[float, typer.Option(help="sampling temperature")]
TopPOpt = Annotated[float | None, typer.Option(help="nucleus sampling top_p (not sent unless given)")]
TopKOpt = Annotated[int | None, typer.Option(help="top_k (vLLM, SGLang; not sent unless given)")]
IgnoreEosOpt = Annotated[bool, typer.Option("--ignore-eos/--no-ignore-eos", help="generate max_tokens")]
MaxErrorsOpt = Annotated[str | None, typer.Option(help="stop after N failed requests, or a share: 5%")]
NumPromptsOpt = Annotated[int | None, typer.Option(help="count-bounded run: send this many requests")]
RequestRateOpt = Annotated[str | None, typer.Option(help="vLLM's name of --rate; inf: all at once")]
MaxConcOpt = Annotated[int | None, typer.Option(help="open loop: most requests in flight")]
RangeRatioOpt = Annotated[float, typer.Option(help="lengths uniform in L(1-r)..L(1+r), 0 <= r < 1")]
DatasetOpt = Annotated[
    str,
    typer.Option(
        help="random (synthetic), sharegpt (--dataset-path FILE.json), hf (--dataset-path DIR: a local Hugging "
        "Face dataset) or prefix_repetition (shared prefixes)"
    ),
]
HfSplitOpt = Annotated[str | None, typer.Option(help="hf: the dataset's split (default: its only one)")]
HfSubsetOpt = Annotated[str | None, typer.Option(help="hf: the config, a folder of --dataset-path")]
HfOutputLenOpt = Annotated[
    int | None, typer.Option(help="hf: max_tokens of every request (default: each answer's length)")
]
PrefixLenOpt = Annotated[
    int | None,
    typer.Option(
        "--prefix-len", "--prefix-repetition-prefix-len", help="prefix_repetition: prefix words [256]"
    ),
]
NumPrefixesOpt = Annotated[
    int | None,
    typer.Option(
        "--num-prefixes", "--prefix-repetition-num-prefixes", help="prefix_repetition: prefixes [10]"
    ),
]
PctMetricsOpt = Annotated[str | None, typer.Option(help="percentiles of: ttft,tpot,itl,e2el [ttft,tpot,itl]")]
MetricPctOpt = Annotated[str | None, typer.Option(help="which percentiles, e.g. 50,90,99 [99]")]
GoodputOpt = Annotated[
    list[str] | None, typer.Option(help="goodput limits 'ttft:MS tpot:MS e2el:MS' (vLLM's; repeatable)")
]
LabelOpt = Annotated[str | None, typer.Option(help="a name stored with the run")]
MetadataOpt = Annotated[list[str] | None, typer.Option(help="KEY=VALUE stored with the run (repeatable)")]
DatasetPathOpt = Annotated[
    Path | None, typer.Option(help="ShareGPT-format JSON file, or a local Hugging Face dataset (hf)")
]
InputOpt = Annotated[
    int,
    typer.Option(
        "--input-tokens",
        "--random-input-len",
        "--prefix-repetition-suffix-len",
        help="prompt tokens (approx.)",
    ),
]
OutputOpt = Annotated[
    int,
    typer.Option(
        "--output-tokens",
        "--random-output-len",
        "--prefix-repetition-output-len",
        help="max_tokens per request",
    ),
]
GpuOpt = Annotated[str | None, typer.Option(help="the server's GPU (catalog id), stored with the run")]
EngineOpt = Annotated[str | None, typer.Option(help="the server's engine (default: read from /metrics)")]
EngineVersionOpt = Annotated[str | None, typer.Option(help="engine version (default: vLLM's /version)")]
TpOpt = Annotated[int | None, typer.Option(help="the server's tensor-parallel degree, stored with the run")]
