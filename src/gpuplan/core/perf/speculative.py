"""Speculative decoding as part of a deployment: a proposer drafts ``k`` tokens, the target verifies them.

A verify step runs the target over ``k + 1`` tokens of every running sequence at once (the last
accepted token and the ``k`` drafts) and keeps the drafts up to the first rejection, plus one token of
its own. With an acceptance rate α per drafted token, independent of position (Leviathan et al. 2023,
"Fast Inference from Transformers via Speculative Decoding", arXiv 2211.17192, eq. 1), the expected
tokens one verify step emits per sequence are

    τ = (1 − α^(k+1)) / (1 − α)                     α = 0.8, k = 3: τ = 2.952

**Cost of a step** (``core/perf/roofline.py``, ``StepModel.decode_s``): the verify pass processes
``B·(k+1)`` tokens, so its GEMM FLOPs and attention FLOPs are ``(k+1)×`` a plain decode step's, while the
weights stream once and each sequence's KV is read once (the ``k + 1`` queries share it, as in a
prefill chunk). The proposer adds ``k`` sequential passes:

* ``draft``: ``k`` decode steps of the draft model on the same GPUs and TP (vLLM's draft tensor
  parallelism defaults to the target's), each priced by its own step model without the host step
  overhead (the draft passes run inside the engine step);
* ``mtp`` / ``eagle``: ``k`` passes of one extra decoder layer of the target's shape plus the LM head
  (DeepSeek-V3's MTP module is one transformer block sharing embedding and output head, arXiv
  2412.19437 §2.2; an EAGLE head is one decoder layer on the target's features and head, arXiv
  2401.15077). Assumed: the layer is as wide as a target layer (EAGLE-3's reduced draft vocabulary is
  not modelled, so its head is priced high);
* ``ngram``: ~0 (prompt lookup runs on the CPU between steps; vLLM's ``ngram`` method).

``t_step = t_verify + k · t_proposer``, and per sequence

    TPOT = t_step / τ,    output tokens/s at batch B = B · τ / t_step.

At batch 1 the verify pass is bound by weight streaming, so it costs about a plain step and the gain is
``τ / (1 + k · t_proposer / t_plain)``. At a batch where the step is compute-bound the verify pass costs
``(k+1)×`` a plain step and the gain falls to about ``τ / (k+1) < 1``: speculation then costs throughput.

A step that carries a prefill chunk beside the verify pass costs the chunk's marginal time on top of one
emitted token's share of the verify step (``StepModel.step_s``): the simulator's token bookkeeping then
sums to the real engine's busy time; a request's first token may come up to ``(1 − 1/τ)`` of a verify
step per chunk early. The proposer also prefills each prompt (a draft model builds its KV; an MTP or EAGLE
layer runs over the prompt's hidden states): its prefill GEMMs and attention are added to every prefill.

**Memory** (``core/perf/memory.py``): the proposer's weights (a draft model whole; one layer for
``mtp``/``eagle``, whose embedding and head are the target's) and its KV per token are added. Each
running request also holds ``k`` draft slots in the target's KV pages for the verify step: at most ``k``
tokens of a multi-thousand-token context, left out (negligible, and conservative the other way: the
paged pool is counted by whole prompts + answers).

**Defaults** per method (:data:`METHOD_DEFAULTS`, each with its source): an acceptance rate is a property
of the draft, the target and the traffic, so measure it (vLLM logs ``Avg Draft acceptance rate``, SGLang
``accept len``) and pass it; the defaults are published figures, not guarantees.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, Field, model_validator

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.model.spec import KvGroup, ModelSpec

SpecMethod = Literal["draft", "mtp", "eagle", "ngram"]
SPEC_METHODS: tuple[SpecMethod, ...] = ("draft", "mtp", "eagle", "ngram")
MAX_DRAFT_TOKENS = 16
"""vLLM and SGLang configure at most a handful of speculative tokens (the vLLM docs' examples use 3-5,
DeepSeek's nebius MTP fine-tune 6-7); 16 leaves room and catches a typo (k = 100)."""


class MethodDefault(NamedTuple):
    """A method's default draft length and per-token acceptance rate, and where they come from."""

    draft_tokens: int
    acceptance_rate: float
    source: str


METHOD_DEFAULTS: dict[SpecMethod, MethodDefault] = {
    "mtp": MethodDefault(
        1,
        0.85,
        "DeepSeek-V3 technical report (arXiv 2412.19437, §5.4.3): with one MTP module the second token "
        "is accepted 85-90 % of the time across generation topics, for 1.8x tokens/s; the low end",
    ),
    "eagle": MethodDefault(
        3,
        0.74,
        "EAGLE-3 (arXiv 2503.01840) reports tree-draft acceptance lengths near 6 at depth 8; chain drafts "
        "as vLLM runs them reach less: EAGLE-3 on Llama-3.1-8B-Instruct, MT-Bench, k = 7, mean acceptance "
        "length 3.53 (https://github.com/vllm-project/vllm/issues/26191), which eq. 1 reads as alpha = "
        "0.74; k = 3 as in vLLM's EAGLE example (https://docs.vllm.ai/en/latest/features/speculative_decoding/)",
    ),
    "ngram": MethodDefault(
        3,
        0.68,
        "vLLM ngram on an editing set (blazedit, k = 5, prompt_lookup 2-5): 2.96 tokens per step over all "
        "steps, drafts included or not (https://github.com/vllm-project/vllm/pull/24344), which eq. 1 reads "
        "as alpha = 0.68. Prompt lookup does best where answers copy the prompt (edits, RAG, summaries); "
        "on open chat it rarely matches: pass the measured rate",
    ),
    "draft": MethodDefault(
        4,
        0.7,
        "Leviathan et al. 2023 (https://arxiv.org/abs/2211.17192, Table 3): transformer drafts (T5-small "
        "to T5-large for T5-XXL, LaMDA 100M to 8B for LaMDA 137B) reach alpha about 0.55-0.82 by task and "
        "temperature (n-gram drafts 0.03-0.23); 0.7 mid-range; k = 4, near their optimal gamma at that alpha",
    ),
}
"""Each method's default ``(k, α)`` with its source (module docstring)."""


def tokens_per_step(*, acceptance_rate: float, draft_tokens: int) -> float:
    """τ = (1 − α^(k+1)) / (1 − α): expected tokens a verify step emits per sequence (Leviathan eq. 1)."""
    alpha = acceptance_rate
    return (1.0 - alpha ** (draft_tokens + 1)) / (1.0 - alpha)


class Speculative(FrozenModel):
    """Speculative decoding of a deployment: the proposer, its draft length and acceptance rate.

    ``draft_tokens`` and ``acceptance_rate`` default to the method's :data:`METHOD_DEFAULTS`;
    ``draft_model`` is the draft model's spec for ``draft`` (resolved at the edge, like the target)."""

    method: SpecMethod
    draft_tokens: int = Field(ge=1, le=MAX_DRAFT_TOKENS, description="k: tokens drafted per verify step")
    acceptance_rate: float = Field(gt=0, lt=1, description="alpha: chance each drafted token is accepted")
    draft_model: ModelSpec | None = Field(default=None, description="the draft model (method 'draft' only)")

    @model_validator(mode="before")
    @classmethod
    def _method_defaults(cls, data: Any) -> Any:
        """Fill a left-out (or null) k or α with the method's default."""
        if not isinstance(data, dict) or data.get("method") not in METHOD_DEFAULTS:
            return data
        default = METHOD_DEFAULTS[data["method"]]
        filled = dict(data)
        for name in ("draft_tokens", "acceptance_rate"):
            if filled.get(name) is None:
                filled[name] = getattr(default, name)
        return filled

    @model_validator(mode="after")
    def _draft_model_iff_draft(self) -> Speculative:
        if self.method == "draft" and self.draft_model is None:
            raise ValueError("method 'draft' needs draft_model (the small model that drafts the tokens)")
        if self.method != "draft" and self.draft_model is not None:
            raise ValueError(
                f"draft_model is for method 'draft' only; method '{self.method}' drafts without one"
            )
        return self

    @property
    def tokens_per_step(self) -> float:
        """τ of this configuration (:func:`tokens_per_step`)."""
        return tokens_per_step(acceptance_rate=self.acceptance_rate, draft_tokens=self.draft_tokens)

    @property
    def queries(self) -> int:
        """Tokens per sequence in a verify pass: the last accepted token and the k drafts."""
        return self.draft_tokens + 1

    @property
    def label(self) -> str:
        """In words, for plans and tables: ``eagle k=3 α=0.74``."""
        return f"{self.method} k={self.draft_tokens} α={self.acceptance_rate:g}"

    def proposer(self, target: ModelSpec) -> ModelSpec | None:
        """The model whose passes draft the tokens: the draft model, one layer of the target (``mtp``,
        ``eagle``), or None (``ngram``: no GPU work)."""
        if self.method == "draft":
            return self.draft_model
        if self.method == "ngram":
            return None
        return one_layer(target, label=self.method)

    @property
    def shares_embeddings(self) -> bool:
        """Whether the proposer uses the target's embedding and LM head (MTP, EAGLE): their weights are
        then not loaded twice."""
        return self.method in ("mtp", "eagle")


MTP_MODEL_TYPES = frozenset({"deepseek_v3", "glm4_moe", "qwen3_next"})
"""Model types whose checkpoints ship multi-token-prediction layers: DeepSeek-V3/R1 and GLM-4.5
(``num_nextn_predict_layers: 1`` in https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
and https://huggingface.co/zai-org/GLM-4.5/blob/main/config.json), Qwen3-Next (``mtp_num_hidden_layers``,
https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json)."""


def check_speculative(spec: Speculative, target: ModelSpec) -> None:
    """ValueError when ``spec`` cannot run on ``target``: MTP on a model without MTP layers, or a draft
    model with another vocabulary (the target verifies the draft's token ids, so they must be its own)."""
    if spec.method == "mtp" and target.model_type not in MTP_MODEL_TYPES:
        raise ValueError(
            f"--spec-method mtp needs a model with multi-token-prediction layers "
            f"({', '.join(sorted(MTP_MODEL_TYPES))}); {target.id} ({target.model_type}) has none"
        )
    draft = spec.draft_model
    if draft is not None and draft.vocab_size != target.vocab_size:
        raise ValueError(
            f"--draft-model {draft.id} has a {draft.vocab_size:,}-token vocabulary and {target.id} "
            f"{target.vocab_size:,}: a draft must share the target's tokenizer"
        )


def per_token_s(spec: Speculative, *, verify_s: float, proposer_pass_s: float) -> float:
    """Decode time per emitted token: ``(t_verify + k · t_proposer) / τ`` (module docstring)."""
    return (verify_s + spec.draft_tokens * proposer_pass_s) / spec.tokens_per_step


_LayoutT = TypeVar("_LayoutT", bound=BaseModel)


def own_layout(layout: _LayoutT) -> _LayoutT:
    """The proposer's layout: the target's GPUs, TP and dtypes, one pipeline stage, one replica, no
    expert parallelism and no speculation of its own (vLLM runs the draft at the target's TP)."""
    return layout.model_copy(update={"speculative": None, "pp": 1, "ep": 1, "replicas": 1})


def one_layer(model: ModelSpec, *, label: str) -> ModelSpec:
    """One decoder layer of ``model``'s shape and its LM head: the shape of an MTP module or EAGLE head
    (norms and the MTP projection left out). A MoE model's extra layer is a MoE layer (DeepSeek-V3's MTP
    block is); its attention is full (the first full-attention KV group's width)."""
    groups = model.kv_groups
    full = next((g for g in groups if g.window_tokens is None), groups[0] if groups else None)
    kv = (
        (KvGroup(num_layers=1, elements_per_token_per_layer=full.elements_per_token_per_layer),)
        if full
        else ()
    )
    moe = model.moe.model_copy(update={"num_moe_layers": 1}) if model.moe is not None else None
    return model.model_copy(
        update={
            "id": f"{model.id} ({label} layer)",
            "num_layers": 1,
            "num_attention_layers": None,
            "num_dense_mlp_layers": 0 if moe is not None else None,
            "moe": moe,
            "kv_groups": kv,
            "tie_word_embeddings": True,  # one vocab x hidden matrix: the head it runs (its input
            # embedding is a lookup of B rows, not a stream of the table)
            "extra_params": 0,
            "recurrent_state_bytes": 0.0,
            "params_reported": None,
            "active_params_reported": None,
        }
    )
