#!/usr/bin/env bash
# One prepared device check: gpuplan bench gpu + bench train on the GPU machine; results under $OUT.
set -u
OUT=${OUT:-/tmp/gpuplan-out}; mkdir -p "$OUT"
export PYTHONPATH=src:${DEVDEPS:-} GPUPLAN_STORE="$OUT/results.sqlite"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/smi.txt" 2>&1
python -c "import torch, sys; print(torch.__version__, torch.cuda.is_available())" > "$OUT/env.txt" 2>&1
python -c "import transformers; print(transformers.__version__)" >> "$OUT/env.txt" 2>&1
python -c "import pydantic, typer, sqlalchemy, scipy, yaml, rich, httpx; print('deps ok')" >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 240 python -m gpuplan bench gpu --format json > "$OUT/bench_gpu.json" 2> "$OUT/bench_gpu.err"
tail -20 "$OUT/bench_gpu.err"
timeout 200 python -m gpuplan bench train --model Qwen/Qwen3-0.6B --batch-sizes 1,2,4,8,16,64 --seq-len 2048 \
  --format json > "$OUT/bench_train.json" 2> "$OUT/bench_train.err"
tail -20 "$OUT/bench_train.err"
