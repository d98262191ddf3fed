"""Per-step time of one model replica: GEMMs, attention and TP communication, each a roofline.

A forward step is a sequence of kernels; each is bound by either math or memory, so the step time
is the sum over kernel classes of max(bytes / achieved bandwidth, FLOPs / achieved peak) (Williams
et al. 2009, "Roofline"), plus collectives and a fixed host overhead:

    t_step = max(t_W, t_F) + κ·min(t_W, t_F)                weights stream once per step
           + max(KV / (BW·η_bw), F_attn / (P16·η_c))        attention reads each sequence's KV
           + n_allreduce · (α + 2(tp−1)/tp · msg / (link·η_link))   ring all-reduce (Patarasuk 2009)
           + overhead (+ per-layer kernel launches in prefill: decode steps replay CUDA graphs)

    with t_W = W / (BW·η_bw) and t_F = F_gemm / (P·η_c).

κ (``overlap_loss``) is the part of the shorter of weight streaming and GEMM math that the longer
does not hide. A pure roofline has κ = 0; a step is many kernels of different shapes (QKV, out,
gate/up, down, per layer, with a tail at each wave boundary), so near the ridge point the two add
up rather than overlap. κ is fitted with the other factors (``data/calibration/calibration.yaml``).

A step of continuous batching may carry decode tokens and prefill chunks together (chunked
prefill): the weights stream once for all of them (``step_s``).

Pipeline parallelism splits the layers over ``pp`` stages; a token crosses all stages, so the
latency of one step is ``pp`` stage times while ``pp`` micro-batches keep every stage busy.
MoE layers read only the experts that the batch routes to: E·(1 − (1 − k/E)^B) of E experts for
B tokens with uniform top-k routing. Attention data parallelism (``Layout.attention_dp``), the MoE
all-to-all and expert load imbalance are priced in ``core/perf/expert_parallel.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from gpuplan.core.calibration.serving import Calibration
from gpuplan.core.dtypes import DType
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model import arith
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf import speculative
from gpuplan.core.perf.engine_profiles import (
    EngineProfile,
    batching_limits,
    schedules_ahead,
    unchunked_prefill_tokens,
)
from gpuplan.core.perf.engine_releases import host_step_s, release_terms
from gpuplan.core.perf.expert_parallel import allreduce_group, alltoall_terms_s, imbalance_factor
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.memory import (
    kv_bytes_for_sequence_per_gpu,
    layout_weight_bytes,
    recurrent_state_bytes_per_gpu,
    usable_memory_bytes,
)
from gpuplan.core.perf.peaks import compute_peak_flops, power_cap, sixteen_bit_peak_flops, tp_link
from gpuplan.core.units import GIB

ALLREDUCES_PER_LAYER = 2
"""Megatron TP: one all-reduce after attention, one after the MLP (Shoeybi et al. 2019, §3)."""


@dataclass(frozen=True)
class StepModel:
    """Precomputed per-replica quantities; ``decode_s`` and ``prefill_s`` are cheap to call."""

    model: ModelSpec
    gpu: GpuSpec
    layout: Layout
    gemm_flops_per_s: float
    attn_flops_per_s: float
    bytes_per_s: float
    dense_weight_bytes: float
    routed_weight_bytes: float
    kv_dtype: DType
    allreduce_s_per_byte: float
    allreduce_latency_s: float
    overhead_s: float
    prefill_launch_s: float
    matmul_flops_per_token: float
    lm_head_flops_per_token: float
    engine: EngineProfile
    max_seqs: int
    chunk_tokens: int
    """Prefill chunk of a chunking engine (its default ``max_batched_tokens``)."""
    whole_prompt_tokens: int | None
    """Set where the engine's release prefills whole prompts in steps of their own, this many tokens
    at most, while decodes wait (``unchunked_prefill_tokens``); None where it chunks."""
    overlap_loss: float
    expert_efficiency: float
    routed_flops_per_token: float
    expert_imbalance: float = 1.0
    """Busiest expert-parallel rank's routed work over the mean (``expert_parallel.imbalance_factor``)."""
    alltoall_terms_s: tuple[float, float] = (0.0, 0.0)
    """(fixed, per token) seconds of a stage's MoE dispatches and combines (``expert_parallel``)."""
    first_token_host_s: float = 0.0
    """Host time of a request outside the steps, before its first token (``ReleaseFactors``)."""
    schedules_ahead: bool = False
    """The release plans each step during the previous one (``engine_profiles.schedules_ahead``)."""
    proposer: StepModel | None = None
    """The speculative proposer's own step model (a draft model, or one MTP/EAGLE layer), built on the
    same GPUs and TP without speculation; None without speculation or for ``ngram``."""
    _memo: dict[tuple[str, int], float] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, model: ModelSpec, gpu: GpuSpec, layout: Layout, cal: Calibration) -> StepModel:
        engine = layout.engine
        max_seqs, chunk = batching_limits(engine, usable_gib=usable_memory_bytes(gpu) / GIB, gpu_id=gpu.id)
        whole_prompts = unchunked_prefill_tokens(engine=engine, version=layout.engine_version, model=model)
        peak, low = compute_peak_flops(gpu, layout.weight_dtype)
        eng, math_eng, layer_step_s, host_s = release_terms(model, layout, cal)
        power = power_cap(gpu, cal.power_limit_exponent)
        eta_c = cal.compute(gpu.family) * math_eng * power * (cal.low_precision_compute_scale if low else 1.0)
        weights = layout_weight_bytes(model, layout)
        tp, token_share = allreduce_group(layout)
        ring = 2 * (tp - 1) / tp * token_share if tp > 1 else 0.0
        link_kind, link_bw = tp_link(gpu, tp)
        link = link_bw * cal.link_efficiency
        ep_link_bw = tp_link(gpu, min(layout.ep, gpu.interconnect.node_gpus))[1] * cal.link_efficiency
        ranks = layout.attention_dp  # each attention-DP rank schedules and prefills its own requests
        draft = None if layout.speculative is None else layout.speculative.proposer(model)
        return cls(
            model=model,
            gpu=gpu,
            layout=layout,
            gemm_flops_per_s=peak * eta_c,
            attn_flops_per_s=sixteen_bit_peak_flops(gpu) * cal.compute(gpu.family) * math_eng * power,
            bytes_per_s=gpu.memory_bandwidth_bytes_per_s * cal.bandwidth(gpu.family) * eng,
            dense_weight_bytes=weights.dense_linear + weights.embeddings,
            routed_weight_bytes=weights.routed_experts,
            kv_dtype=layout.resolved_kv_dtype,
            allreduce_s_per_byte=ring / link if tp > 1 else 0.0,
            allreduce_latency_s=2 * (tp - 1) * cal.hop_latency(link_kind),
            overhead_s=cal.overhead(engine.name) + layer_step_s * model.num_layers,
            prefill_launch_s=cal.layer_overhead_s * model.num_layers,
            matmul_flops_per_token=arith.matmul_flops_per_token(model),
            lm_head_flops_per_token=arith.lm_head_flops_per_token(model),
            engine=engine,
            max_seqs=max_seqs * ranks,
            chunk_tokens=chunk * ranks,
            whole_prompt_tokens=whole_prompts * ranks if whole_prompts else whole_prompts,
            overlap_loss=cal.overlap_loss,
            expert_efficiency=cal.expert_efficiency,
            routed_flops_per_token=arith.routed_flops_per_token(model),
            expert_imbalance=imbalance_factor(layout),
            alltoall_terms_s=alltoall_terms_s(model, gpu, layout, intra_bytes_per_s=ep_link_bw),
            first_token_host_s=host_s,
            schedules_ahead=schedules_ahead(engine, layout.engine_version, layout),
            proposer=None if draft is None else cls.build(draft, gpu, speculative.own_layout(layout), cal),
        )

    @property
    def chunked_prefill(self) -> bool:
        """Whether the engine chunks prompts by default (False: whole prompts, decodes wait)."""
        return self.whole_prompt_tokens is None

    @property
    def prefill_step_tokens(self) -> int:
        """Prompt tokens one prefill step takes by default: a chunk, or the whole-prompt budget."""
        return self.whole_prompt_tokens or self.chunk_tokens

    def _cached(self, kind: str, tokens: int) -> float:
        """Per-context model arithmetic, memoised: searches call the same contexts thousands of times."""
        key = (kind, tokens)
        if key not in self._memo:
            if kind == "attn":
                value = arith.attention_flops_per_token(self.model, context_tokens=tokens)
            elif kind == "kv":  # a decode step reads the KV and reads + writes any recurrent state
                tp, pp = self.layout.tp, self.layout.pp
                value = kv_bytes_for_sequence_per_gpu(
                    self.model, tokens=tokens, kv_dtype=self.kv_dtype, tp=tp, pp=pp
                ) + 2.0 * recurrent_state_bytes_per_gpu(self.model, tp=tp, pp=pp)
                value /= self.layout.attention_dp  # a GPU reads its own DP rank's sequences only
            else:
                value = arith.prefill_flops(self.model, prompt_tokens=tokens)
            self._memo[key] = value
        return self._memo[key]

    @cached_property
    def _shards(self) -> int:
        return self.layout.gpus_per_replica

    @cached_property
    def _comm_terms_s(self) -> tuple[float, float]:
        """(fixed, per token) seconds of a stage's all-reduces (latency, and bytes over the link) and
        MoE all-to-alls."""
        allreduces = ALLREDUCES_PER_LAYER * self.model.num_layers / self.layout.pp
        per_token = self.model.hidden_size * 2.0 * self.allreduce_s_per_byte
        a2a_fixed_s, a2a_per_token_s = self.alltoall_terms_s
        return allreduces * self.allreduce_latency_s + a2a_fixed_s, allreduces * per_token + a2a_per_token_s

    @cached_property
    def _expert_penalty(self) -> float:
        """Extra time share of routed-expert math: imbalance/η_expert − 1 (0 when experts run like dense
        GEMMs on balanced ranks; the busiest EP rank sets the step)."""
        return self.expert_imbalance / self.expert_efficiency - 1.0

    def _routed_read(self, tokens: float) -> float:
        """Routed-expert bytes a step of ``tokens`` reads: E·(1 − (1 − k/E)^B) experts (uniform routing)."""
        moe = self.model.moe
        if moe is None or self.routed_weight_bytes == 0:
            return 0.0
        touched: float = 1.0 - (1.0 - moe.top_k / moe.num_experts) ** max(tokens, 1.0)
        return self.routed_weight_bytes * touched

    def _comm_s(self, tokens: float) -> float:
        fixed_s, per_token_s = self._comm_terms_s
        return fixed_s + tokens * per_token_s

    def _stage_s(
        self, tokens: float, gemm_flops: float, attn_flops: float, kv_bytes: float, one_rank: bool = False
    ) -> float:
        """One pipeline stage's time (module docstring). Hot path of every search: plain comparisons.
        ``one_rank``: the tokens are one sequence's, so under attention data parallelism its attention
        and dense math run on one DP rank's ``tp`` GPUs while its routed experts still spread over all."""
        stream_bytes, math_flops = self.dense_weight_bytes, gemm_flops
        routed = tokens * self.routed_flops_per_token if self.routed_weight_bytes else 0.0
        if self.routed_weight_bytes:  # routed experts run at expert_efficiency of the dense rate
            stream_bytes += self._routed_read(tokens) / self.expert_efficiency
            math_flops += routed * self._expert_penalty
        stream_s = stream_bytes / self.bytes_per_s
        shards = self._shards
        dense_shards = shards // self.layout.attention_dp if one_rank else shards
        if dense_shards == shards:
            math_s = math_flops / shards / self.gemm_flops_per_s
        else:  # the dense part on one rank's GPUs, the routed experts (and their penalty) on all
            dense_flops, routed_flops = gemm_flops - routed, math_flops - gemm_flops + routed
            math_s = (dense_flops / dense_shards + routed_flops / shards) / self.gemm_flops_per_s
        longer, shorter = (stream_s, math_s) if stream_s >= math_s else (math_s, stream_s)
        gemm_s = longer + self.overlap_loss * shorter
        kv_s = kv_bytes / self.bytes_per_s
        attn_s = attn_flops / dense_shards / self.attn_flops_per_s
        return gemm_s + (kv_s if kv_s >= attn_s else attn_s) + self._comm_s(tokens)

    def decode_s(self, *, batch: float, context: float) -> float:
        """One decode step: every one of ``batch`` sequences (mean context ``context``) emits a token.
        With speculative decoding, the time per emitted token: a verify pass of k + 1 tokens per
        sequence and k proposer passes, over τ (``perf/speculative.py``)."""
        spec = self.layout.speculative
        if spec is None:
            return self._decode_pass_s(batch, context, 1)
        verify_s = self._decode_pass_s(batch, context, spec.queries)
        return speculative.per_token_s(
            spec, verify_s=verify_s, proposer_pass_s=self._proposer_s(batch, context)
        )

    def step_of_tpot_s(self, tpot_s: float) -> float:
        """One engine step from a time per emitted token: τ × TPOT under speculative decoding."""
        spec = self.layout.speculative
        return tpot_s * (1.0 if spec is None else spec.tokens_per_step)

    def _decode_pass_s(self, batch: float, context: float, queries: int) -> float:
        """One pass over ``queries`` new tokens of each of ``batch`` sequences, with the host's step time."""
        return self._with_host_s(self._decode_gpu_s(batch, context, queries))

    def _decode_gpu_s(self, batch: float, context: float, queries: int = 1) -> float:
        """The same pass on the GPUs alone: weights stream once, each sequence's KV is read once, GEMM and
        attention math scale with the tokens."""
        pp = self.layout.pp
        micro = max(batch / pp, 1.0)
        ctx = max(int(context), 1)
        tokens = micro * queries
        stage = self._stage_s(
            tokens,
            tokens * self.matmul_flops_per_token,
            tokens * self._cached("attn", ctx),
            micro * self._cached("kv", ctx),
        )
        return pp * stage

    def _with_host_s(self, gpu_s: float) -> float:
        """A step of ``gpu_s`` on the GPUs plus the engine's host time per step (scheduling, input
        preparation): all of it where the host plans a step only after the last one ended; where the
        release plans each step while the previous one runs, only what outlasts the GPU's work
        (``host_step_s``)."""
        return gpu_s + host_step_s(self.overhead_s, gpu_s, ahead=self.schedules_ahead)

    def _proposer_s(self, batch: float, context: float) -> float:
        """One proposer pass at this batch, without the host step overhead (it runs inside the step)."""
        draft = self.proposer
        return 0.0 if draft is None else draft._decode_gpu_s(batch, context)

    def _proposer_prefill_s(self, tokens: float, prompt_tokens: float, cached_tokens: float) -> float:
        """The proposer's share of a prefill step (it builds its own KV over the prompt)."""
        draft = self.proposer
        if draft is None or tokens <= 0:
            return 0.0
        return draft._prefill_gpu_s(tokens, prompt_tokens, cached_tokens)

    def prefill_s(
        self, *, tokens: float, prompt_tokens: float, cached_tokens: float = 0.0, one_prompt: bool = False
    ) -> float:
        """A prefill step of ``tokens`` prompt tokens drawn from prompts of ``prompt_tokens`` each, of
        which ``cached_tokens`` per prompt were found in the prefix cache (computed: the rest, attending
        over the whole prompt). ``one_prompt``: the tokens are one prompt's, on one attention-DP rank."""
        gpu_s = self._prefill_gpu_s(tokens, prompt_tokens, cached_tokens, one_prompt)
        extra_s = self._proposer_prefill_s(tokens, prompt_tokens, cached_tokens)
        return self._with_host_s(gpu_s + self.prefill_launch_s + extra_s)

    def _prefill_gpu_s(
        self, tokens: float, prompt_tokens: float, cached_tokens: float, one_prompt: bool = False
    ) -> float:
        """The prefill step's passes on the GPUs alone (no host time, no kernel-launch time)."""
        gemm = self._prefill_gemm_flops(tokens, prompt_tokens - cached_tokens)
        attn = self._prefill_attention_flops(tokens, prompt_tokens, cached_tokens)
        return self.layout.pp * self._stage_s(tokens, gemm, attn, 0.0, one_prompt)

    def lone_prefill_s(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        """One prompt alone, split into steps of at most ``prefill_step_tokens`` (vLLM chunked prefill,
        TensorRT-LLM max_num_tokens), each a pass over the weights; the first ``cached_tokens`` come from
        the prefix cache, so only the rest is computed. Under attention data parallelism the prompt runs
        on one DP rank (its attention and dense math are not shared by the others). Memoised per prompt
        length."""
        computed = prompt_tokens - cached_tokens
        if computed <= 0:
            return 0.0
        key = ("lone", prompt_tokens) if not cached_tokens else (f"lone@{cached_tokens}", prompt_tokens)
        if key not in self._memo:
            step_tokens = self.prefill_step_tokens
            full, rest = divmod(computed, max(step_tokens, 1))
            time_s = full * self._one_prompt_s(step_tokens, prompt_tokens, cached_tokens) if full else 0.0
            rest_s = self._one_prompt_s(rest, prompt_tokens, cached_tokens) if rest else 0.0
            self._memo[key] = time_s + rest_s
        return self._memo[key]

    def _one_prompt_s(self, tokens: int, prompt_tokens: int, cached_tokens: int) -> float:
        return self.prefill_s(
            tokens=tokens, prompt_tokens=prompt_tokens, cached_tokens=cached_tokens, one_prompt=True
        )

    def _prefill_gemm_flops(self, tokens: float, prompt_tokens: float) -> float:
        """Weight-matmul FLOPs of ``tokens`` prompt tokens from prompts of ``prompt_tokens``: every
        token but the LM head, which runs once per prompt (its last token, the one sampled)."""
        head = self.lm_head_flops_per_token
        return tokens * (self.matmul_flops_per_token - head) + tokens / max(prompt_tokens, 1.0) * head

    def _prefill_attention_flops(
        self, tokens: float, prompt_tokens: float, cached_tokens: float = 0.0
    ) -> float:
        """Attention FLOPs of ``tokens`` prompt tokens from prompts of ``prompt_tokens`` (causal); with
        ``cached_tokens`` of each prompt cached, the computed tokens are its last ones, which attend
        over the cached prefix too: Σ attention(i) for i = cached + 1 .. prompt."""
        if cached_tokens <= 0:
            prompts = max(tokens / max(prompt_tokens, 1.0), 1e-9)
            total = prompts * self._cached("prefill", max(int(prompt_tokens), 1))
            return max(total - tokens * self.matmul_flops_per_token, 0.0)
        prompts = max(tokens / max(prompt_tokens - cached_tokens, 1.0), 1e-9)
        return max(prompts * (self._attention_upto(prompt_tokens) - self._attention_upto(cached_tokens)), 0.0)

    def _attention_upto(self, tokens: float) -> float:
        """Causal attention FLOPs of prefilling ``tokens`` from scratch: Σ attention(i), i = 1 .. tokens."""
        whole = max(int(tokens), 1)
        return self._cached("prefill", whole) - whole * self.matmul_flops_per_token

    def step_s(
        self,
        *,
        batch: float,
        context: float,
        prefill_tokens: float,
        prompt_tokens: float,
        cached_tokens: float = 0.0,
    ) -> float:
        """One engine step: ``batch`` decode tokens (mean context ``context``) plus a prefill chunk of
        ``prefill_tokens`` from prompts of ``prompt_tokens`` each (``cached_tokens`` of each from the
        prefix cache), sharing one pass over the weights.

        Decode sequences are split into ``pp`` micro-batches; a prefill chunk crosses the stages whole.
        With no prefill it is ``decode_s``, with no decodes ``prefill_s``. With speculative decoding it
        is one emitted token's share of the verify step plus the chunk's marginal time
        (``perf/speculative.py``).
        """
        shape = {"prompt_tokens": prompt_tokens, "cached_tokens": cached_tokens}
        if prefill_tokens <= 0:
            return self.decode_s(batch=batch, context=context)
        if batch <= 0:
            return self.prefill_s(
                tokens=prefill_tokens, prompt_tokens=prompt_tokens, cached_tokens=cached_tokens
            )
        queries = 1 if (spec := self.layout.speculative) is None else spec.queries
        pp = self.layout.pp
        micro = max(batch / pp, 1.0)
        ctx = max(int(context), 1)
        stage = self._stage_s(
            micro * queries + prefill_tokens,
            micro * queries * self.matmul_flops_per_token
            + self._prefill_gemm_flops(prefill_tokens, prompt_tokens - cached_tokens),
            micro * queries * self._cached("attn", ctx)
            + self._prefill_attention_flops(prefill_tokens, prompt_tokens, cached_tokens),
            micro * self._cached("kv", ctx),
        )
        mixed_s = self._with_host_s(pp * stage + self.prefill_launch_s)
        if spec is None:
            return mixed_s
        chunk_s = mixed_s - self._decode_pass_s(batch, context, queries)
        return (
            self.decode_s(batch=batch, context=context)
            + chunk_s
            + self._proposer_prefill_s(prefill_tokens, **shape)
        )
