"""How vLLM and SGLang spell a plan's parallelism and speculative decoding on their command lines.

Parallelism of one replica (``Layout``: ``tp`` x ``pp`` x ``attention_dp`` GPUs, experts split by EP
over ``ep`` of them, or by TP when ``ep == 1``):

- vLLM (https://docs.vllm.ai/en/v0.10.1.1/serving/expert_parallel_deployment.html and
  https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/): ``--data-parallel-size N`` runs N
  engine cores, each of ``--tensor-parallel-size`` GPUs (attention data-parallel across them), and the
  MoE layers form one DP x TP group, split by TP unless ``--enable-expert-parallel`` (EP size is then
  DP x TP, computed by vLLM). Each DP rank has its own scheduler, so ``--max-num-seqs`` is per rank.
- SGLang (https://docs.sglang.io/docs/advanced_features/dp_dpa_smg_guide.md and
  https://docs.sglang.io/cookbook/base/reference/server_arguments): with ``--enable-dp-attention``,
  ``--tp-size`` is every GPU of the instance and ``--dp-size`` the attention data-parallel ranks among
  them (DeepSeek's own launch line: ``--tp 8 --dp 8 --enable-dp-attention``,
  https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp); ``--ep-size`` splits the experts. Its
  ``--max-running-requests`` is the instance's: the scheduler of each DP rank takes
  ``max_running_requests // dp_size`` and rounds the total down to a multiple of dp_size
  (``ServerArgs`` / ``TpModelWorker``, python/sglang/srt in https://github.com/sgl-project/sglang).

Speculative decoding (``Layout.speculative``):

- vLLM ``--speculative-config`` JSON (https://docs.vllm.ai/en/v0.9.1/features/spec_decode.html): ``method``
  ``ngram`` or ``deepseek_mtp`` (DeepSeek-V3-style MTP layers; the MTP method vLLM 0.10 knows) and
  ``num_speculative_tokens``. An EAGLE head is a separate repo the plan does not record, and the V1
  engine of the pinned vLLM has no draft-model proposer ("In vllm v0.10.0, speculative decoding with a
  draft model is not supported", https://docs.vllm.ai/en/v0.14.0/features/spec_decode/): both refused.
- SGLang (https://docs.sglang.io/advanced_features/speculative_decoding.html): ``--speculative-algorithm
  NEXTN`` (MTP; the draft layers load from the target checkpoint) with ``--speculative-num-steps k
  --speculative-eagle-topk 1 --speculative-num-draft-tokens k+1``: a chain of k drafts, as the plan
  priced (no tree). The pinned SGLang (v0.4.10) takes ``EAGLE, EAGLE3, NEXTN``: its draft-model
  ``STANDALONE`` algorithm came later (requested 2025-08-29, https://github.com/sgl-project/sglang/issues/9785)
  and so did ``NGRAM``; EAGLE needs a head repo the plan does not record: all refused.
"""

from __future__ import annotations

import json
import math
from typing import Literal

from gpuplan.core.errors import UserInputError
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.speculative import Speculative

ParallelEngine = Literal["vllm", "sglang"]
VLLM_SPEC_METHODS = {"ngram": "ngram", "mtp": "deepseek_mtp"}
"""Plan method -> vLLM ``speculative_config.method`` (module docstring)."""
SGLANG_SPEC_ALGORITHMS = {"mtp": "NEXTN"}
"""Plan method -> SGLang ``--speculative-algorithm`` (module docstring)."""
SPEC_EAGLE_TOPK = 1
"""One candidate per draft step: the plan prices a chain of k drafted tokens (core/perf/speculative.py)."""


def parallel_flags(engine: ParallelEngine, layout: Layout) -> list[str]:
    """TP, PP, attention-DP and EP flags of one replica of ``layout`` (module docstring)."""
    tp, pp, dp, ep = layout.tp, layout.pp, layout.attention_dp, layout.ep
    if engine == "vllm":
        flags = ["--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp)]
        if dp > 1:
            flags += ["--data-parallel-size", str(dp)]
        return flags + (["--enable-expert-parallel"] if ep > 1 else [])
    flags = ["--tp-size", str(tp * dp), "--pp-size", str(pp)]
    if dp > 1:
        flags += ["--enable-dp-attention", "--dp-size", str(dp)]
    return flags + (["--ep-size", str(ep)] if ep > 1 else [])


def max_seqs_value(engine: ParallelEngine, layout: Layout, running_per_replica: int) -> int:
    """The engine's running-request limit for a replica that runs ``running_per_replica``: per DP rank
    for vLLM, the instance's (a multiple of the DP ranks) for SGLang (module docstring)."""
    dp = layout.attention_dp
    per_rank = math.ceil(running_per_replica / dp)
    return per_rank if engine == "vllm" else per_rank * dp


def speculative_flags(engine: ParallelEngine, spec: Speculative | None) -> list[str]:
    """The engine's speculative-decoding flags for ``spec``; a method the engine (at the pinned image)
    cannot run from what the plan records is refused in one line naming ``--spec-method``."""
    if spec is None:
        return []
    k = spec.draft_tokens
    if engine == "vllm":
        method = VLLM_SPEC_METHODS.get(spec.method)
        if method is None:
            raise _refusal(engine, spec.method, "ngram, mtp")
        config = {"method": method, "num_speculative_tokens": k}
        return ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    algorithm = SGLANG_SPEC_ALGORITHMS.get(spec.method)
    if algorithm is None:
        raise _refusal(engine, spec.method, "mtp")
    steps = ["--speculative-num-steps", str(k), "--speculative-eagle-topk", str(SPEC_EAGLE_TOPK)]
    return ["--speculative-algorithm", algorithm, *steps, "--speculative-num-draft-tokens", str(k + 1)]


def _refusal(engine: str, method: str, rendered: str) -> UserInputError:
    return UserInputError(
        f"--spec-method {method} is not rendered for {engine}: the pinned image cannot run it from what the "
        "plan records (an EAGLE head repo, a draft-model proposer or n-gram support)",
        hint=f"render with the other engine, or re-plan with --spec-method {rendered.replace(', ', ' or ')}",
    )
