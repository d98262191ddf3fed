"""How much of the weight stream a decoder's GEMMs hide: the overlap loss κ, measured on one GPU.

The step model (docs/model.md §2) prices the weight GEMMs of a step as
``max(t_W, t_F) + κ · min(t_W, t_F)``; the fit on published serving rows puts κ at 0.66. This probe
measures κ at the kernel level, with no engine around it: every decoder layer's matrices (QKV,
output, gate+up, down) of a model config, ``layers`` distinct copies so that each pass streams them
from HBM (far beyond L2), multiplied by ``M`` tokens, captured in one CUDA graph (no launch gaps)
and timed with CUDA events. With the GPU's own ceilings measured in the same run,

    BW  = bytes / time of a read-only reduction over a 4 GiB tensor
    P   = FLOPs / time of an 8192³ GEMM in the same dtype
    t_W = weight bytes / BW,  t_F = 2 · M · weight params / P
    κ(M) = (t − max(t_W, t_F)) / min(t_W, t_F)

κ = 0 is a perfect roofline, 1 means streaming and math add up. Near the ridge (t_W ≈ t_F) κ is
best determined; at the ends min(t_W, t_F) is small and κ is noise.

Usage (a GPU machine with torch; no gpuplan install needed):

    python benchmarks/gpu/overlap_probe.py --config src/gpuplan/data/models/configs/meta-llama__Llama-3.1-8B.json \
        --out results.json

``--device cpu --layers 2 --tokens 1,8`` is a smoke test of the arithmetic only (CPU timings mean
nothing here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

DEFAULT_TOKENS = (1, 8, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 8192)
REPEATS = 7
"""Timed passes per token count; the median is kept."""
WARMUP = 2
BANDWIDTH_PROBE_BYTES = 4 * 2**30
PEAK_PROBE_N = 8192


def layer_shapes(config: dict[str, Any], tp: int = 1) -> list[tuple[int, int]]:
    """(in, out) of the four weight matrices of one decoder layer (fused QKV and gate+up) on one of
    ``tp`` tensor-parallel ranks (Megatron split: QKV and gate+up by columns, output and down by rows)."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    ffn = int(config["intermediate_size"])
    return [
        (hidden, (heads + 2 * kv_heads) * head_dim // tp),
        (heads * head_dim // tp, hidden),
        (hidden, 2 * ffn // tp),
        (ffn // tp, hidden),
    ]


def _elapsed_s(fn: Any, device: torch.device, repeats: int = REPEATS) -> float:
    """Median seconds of ``fn()`` over ``repeats`` timed calls after ``WARMUP`` untimed ones."""
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def read_bandwidth(device: torch.device, dtype: torch.dtype, nbytes: int) -> float:
    """Bytes/s of a read-only reduction over ``nbytes`` (what streaming weights does)."""
    x = torch.ones(nbytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype, device=device)
    return nbytes / _elapsed_s(lambda: x.sum(dtype=torch.float32), device)


def gemm_peak(device: torch.device, dtype: torch.dtype, n: int) -> float:
    """FLOP/s of one n³ GEMM."""
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    return 2.0 * n**3 / _elapsed_s(lambda: a @ b, device)


def _pass(inputs: dict[int, torch.Tensor], weights: list[list[torch.Tensor]]) -> None:
    for layer in weights:
        for w in layer:
            torch.mm(inputs[w.shape[0]], w)


def time_pass(
    device: torch.device, tokens: int, weights: list[list[torch.Tensor]], dtype: torch.dtype
) -> float:
    """Seconds of one pass over every layer's GEMMs at ``tokens`` rows, CUDA-graph replayed on a GPU."""
    widths = {w.shape[0] for layer in weights for w in layer}
    inputs = {k: torch.randn(tokens, k, dtype=dtype, device=device) for k in widths}
    if device.type != "cuda":
        return _elapsed_s(lambda: _pass(inputs, weights), device, repeats=3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _pass(inputs, weights)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _pass(inputs, weights)
    return _elapsed_s(graph.replay, device)


def probe(
    config: dict[str, Any], *, layers: int, tokens: list[int], device: torch.device, tp: int = 1
) -> dict[str, Any]:
    dtype = torch.bfloat16
    shapes = layer_shapes(config, tp)
    weights = [[torch.randn(k, n, dtype=dtype, device=device) for k, n in shapes] for _ in range(layers)]
    params = layers * sum(k * n for k, n in shapes)
    weight_bytes = params * 2
    bw = read_bandwidth(device, dtype, BANDWIDTH_PROBE_BYTES if device.type == "cuda" else 2**24)
    peak = gemm_peak(device, dtype, PEAK_PROBE_N if device.type == "cuda" else 256)
    rows = []
    for m in tokens:
        t = time_pass(device, m, weights, dtype)
        t_w, t_f = weight_bytes / bw, 2.0 * m * params / peak
        shorter = min(t_w, t_f)
        rows.append(
            {
                "tokens": m,
                "time_s": t,
                "stream_s": t_w,
                "math_s": t_f,
                "kappa": (t - max(t_w, t_f)) / shorter if shorter > 0 else None,
                "ridge_share": shorter / max(t_w, t_f),
            }
        )
    return {
        "dtype": "bf16",
        "layers": layers,
        "tp": tp,
        "weight_params": params,
        "weight_bytes": weight_bytes,
        "read_bandwidth_bytes_per_s": bw,
        "gemm_peak_flops_per_s": peak,
        "rows": rows,
    }


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"weights {result['weight_bytes'] / 1e9:.2f} GB ({result['layers']} layers, tp={result['tp']} shapes), "
        f"read BW {result['read_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, "
        f"bf16 GEMM peak {result['gemm_peak_flops_per_s'] / 1e12:.0f} TFLOP/s",
        f"{'tokens':>7} {'time ms':>9} {'t_W ms':>8} {'t_F ms':>8} {'min/max':>8} {'kappa':>7}",
    ]
    for r in result["rows"]:
        kappa = "" if r["kappa"] is None else f"{r['kappa']:.2f}"
        lines.append(
            f"{r['tokens']:>7} {r['time_s'] * 1e3:>9.3f} {r['stream_s'] * 1e3:>8.3f} "
            f"{r['math_s'] * 1e3:>8.3f} {r['ridge_share']:>8.2f} {kappa:>7}"
        )
    near = [r["kappa"] for r in result["rows"] if r["kappa"] is not None and r["ridge_share"] >= 0.5]
    if near:
        lines.append(
            f"kappa near the ridge (min/max >= 0.5): median {statistics.median(near):.2f} over {len(near)}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True, help="HF-style config.json of the model")
    parser.add_argument("--layers", type=int, default=None, help="decoder layers to stream (default: all)")
    parser.add_argument("--tp", type=int, default=1, help="shapes of one tensor-parallel rank")
    parser.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("overlap_probe: no CUDA device; run it on a GPU machine (or --device cpu for a smoke test)")
        return 2
    config = json.loads(args.config.read_text(encoding="utf-8"))
    layers = args.layers or int(config["num_hidden_layers"])
    tokens = [int(t) for t in args.tokens.split(",")]
    result = probe(config, layers=layers, tokens=tokens, device=device, tp=args.tp)
    result["model_config"] = args.config.name
    result["device_name"] = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    result["torch"] = torch.__version__
    if args.out:
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
