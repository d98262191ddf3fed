"""The "Why" of ``train-plan``: why the winning training plan beats the next, written from the numbers
the layout search and the cost already computed for each plan (step time, cost per run, memory
headroom, parallel layout, the largest part of the step), never recomputed and never canned.

Every plan of one answer trains the same job (the same global batch of the same sequences), so the
tokens per step are the same for all of them and step times compare directly: a plan with half the step
time trains the budget in half the wall time.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.core.pricing import quote_label
from gpuplan.core.training.spec import TrainingLayout
from gpuplan.usecases.training_plan import TrainPlan

COMPUTE_BOUND_SHARE = 0.9
"""A step is called compute-bound when compute is at least this share of it (a choice of wording: the
parts themselves are printed, ``StepPrediction.breakdown``)."""
TIGHT_MEMORY_SHARE = 0.05
"""Memory headroom below this share of the usable memory is called tight (a choice of wording)."""
WHOLE_DOLLARS_FROM_USD = 100.0
"""Costs from this many dollars print without cents (a choice of wording)."""
WHOLE_HOURS_FROM_H = 1000.0
"""Wall times from this many hours print as whole hours (a choice of wording)."""
OVERHEAD_HINTS = {
    "exposed comm, data parallel": "faster scale-out (--inter-node-gbps) or fewer data-parallel ranks",
    "exposed comm, TP/CP/EP/PP": "a layout that keeps tensor parallelism inside one NVLink domain",
    "pipeline bubble": "more micro-batches per step (a larger --global-batch)",
    "optimizer": "the optimizer reads and writes its states from HBM every step",
    "other (QLoRA dequant)": "QLoRA dequantises the nf4 base every pass; LoRA on a bf16 base does not",
    "host (kernel launch)": "more tokens per micro-batch, or fewer kernels (torch.compile, CUDA graphs, fused layers)",
}
"""What would shrink each non-compute part of a step (names: ``StepPrediction.breakdown``)."""


def explain_training(
    plans: Sequence[TrainPlan], *, tokens: float, objective: str, deadline_hours: float | None
) -> list[str]:
    """Lines, most important first: the winner, against the next plan (and the best on another GPU),
    its memory headroom, layout and limit, the other objective's pick, the deadline."""
    best = plans[0]
    lines = [_winner(best, tokens, objective)]
    others = plans[1:2]
    other_gpu = next((p for p in plans[1:] if p.gpu != best.gpu), None)
    if other_gpu is not None and other_gpu not in others:
        others = [*others, other_gpu]
    lines += [_versus(best, p) for p in others]
    lines += [_memory(best), f"Layout: {layout_words(best.parallel)} ({best.layout}).", _limit(best)]
    lines += _other_objective(plans, objective)
    if deadline_hours is not None:
        spare_h = deadline_hours - best.cost.wall_hours
        allowed = f"{hours(best.cost.wall_hours)} h of the {deadline_hours:g} h allowed"
        lines.append(f"Deadline: {allowed} ({hours(spare_h)} h to spare).")
    return lines


def money(usd: float) -> str:
    """Dollars as the Why prints them: cents below $100 (a small fine-tune), whole dollars above."""
    return f"${usd:,.2f}" if usd < WHOLE_DOLLARS_FROM_USD else f"${usd:,.0f}"


def hours(value_h: float) -> str:
    """Hours as the Why prints them: three significant digits, whole hours from 1,000 up."""
    return f"{value_h:,.0f}" if value_h >= WHOLE_HOURS_FROM_H else f"{value_h:.3g}"


def _usd(plan: TrainPlan) -> float | None:
    return plan.cost.usd_by_price_kind.get("on_demand")


def _name(plan: TrainPlan) -> str:
    return f"{plan.gpus}x {plan.gpu}"


def _winner(best: TrainPlan, tokens: float, objective: str) -> str:
    usd = _usd(best)
    if usd is not None and best.price_quote is not None:
        price = (
            f" for {money(usd)} on demand (${best.price_quote.usd_per_gpu_hour:.2f}/GPU-h, "
            f"{quote_label(best.price_quote)})"
        )
    else:
        price = " (no on-demand quote on this price basis, so no cost)"
    ranked = "on-demand cost per run" if objective == "cost" else "wall time"
    step = best.step
    return (
        f"Best: {_name(best)} trains the {tokens:.3g} tokens in {hours(best.cost.wall_hours)} h{price}: "
        f"{step.step_time_s:.3g} s per step, {step.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, "
        f"MFU {step.mfu:.3f}; ranked by {ranked}."
    )


def _cost_versus(best: TrainPlan, other: TrainPlan) -> str:
    mine, theirs = _usd(best), _usd(other)
    if mine is None or theirs is None:
        unpriced = best.gpu if mine is None else other.gpu
        return f"cost per run not comparable (no on-demand quote for {unpriced})"
    percent = round((mine / theirs - 1) * 100)
    change = f"{percent:+d}%" if percent else "the same to the percent"
    return f"cost per run {money(mine)} vs {money(theirs)} ({change})"


def _versus(best: TrainPlan, other: TrainPlan) -> str:
    """The winner against one other plan: step time (the same tokens per step), wall time, cost, memory."""
    ratio = other.step.step_time_s / best.step.step_time_s
    return (
        f"Against {_name(other)} ({other.layout}): step {best.step.step_time_s:.3g} s vs "
        f"{other.step.step_time_s:.3g} s ({ratio:.2f}x the time per step, the same tokens per step), "
        f"{hours(best.cost.wall_hours)} h vs {hours(other.cost.wall_hours)} h, {_cost_versus(best, other)}, "
        f"memory {best.memory_gib_per_gpu:.1f} vs {other.memory_gib_per_gpu:.1f} GiB per GPU."
    )


def _memory(plan: TrainPlan) -> str:
    free_gib = plan.usable_gib_per_gpu - plan.memory_gib_per_gpu
    share = free_gib / plan.usable_gib_per_gpu
    tight = (
        ": tight, a longer sequence or a larger micro-batch would not fit"
        if share < TIGHT_MEMORY_SHARE
        else ""
    )
    return (
        f"Memory headroom: {plan.memory_gib_per_gpu:.1f} of {plan.usable_gib_per_gpu:.1f} GiB usable per GPU, "
        f"{free_gib:.1f} GiB ({share:.0%}) free{tight}."
    )


def layout_words(layout: TrainingLayout) -> str:
    """The parallel layout in words: each degree above 1, the ZeRO stage, micro-batch and recompute."""
    degrees = (
        ("tensor", layout.tp),
        ("pipeline", layout.pp),
        ("context", layout.cp),
        ("expert", layout.ep),
        ("data", layout.dp),
    )
    split = " x ".join(f"{n}-way {name}" for name, n in degrees if n > 1) or "one GPU"
    parallel = f"{split} parallel" if split != "one GPU" else split
    if layout.virtual_stages > 1:
        parallel += f" (interleaved 1F1B, {layout.virtual_stages} model chunks per pipeline stage)"
    ckpt = (
        "no activation recompute" if layout.checkpointing == "none" else f"{layout.checkpointing} recompute"
    )
    return f"{parallel}, ZeRO stage {layout.zero_stage}, micro-batch {layout.micro_batch}, {ckpt}"


def _limit(plan: TrainPlan) -> str:
    """What sets the step time: compute (the GPU's tensor throughput), or its largest other part."""
    step = plan.step
    share = step.compute_s / step.step_time_s
    name, seconds = max(step.breakdown()[1:], key=lambda part: part[1])
    if share >= COMPUTE_BOUND_SHARE:
        return (
            f"Limit: compute is {share:.0%} of the step (MFU {step.mfu:.3f}), so the GPU's tensor throughput "
            f"sets the time; the largest other part is {name}, {seconds:.3g} s."
        )
    return (
        f"Limit: compute is {share:.0%} of the step; {name} takes {seconds:.3g} s "
        f"({seconds / step.step_time_s:.0%}): {OVERHEAD_HINTS[name]}."
    )


def _other_objective(plans: Sequence[TrainPlan], objective: str) -> list[str]:
    """The pick of the other objective among the plans shown, when it is not the winner."""
    best = plans[0]
    if objective == "cost":
        fastest = min(plans, key=lambda p: p.cost.wall_hours)
        if fastest is best:
            return []
        return [
            f"Fastest shown: {_name(fastest)} in {hours(fastest.cost.wall_hours)} h, {_cost_versus(fastest, best)}; "
            "--objective time ranks by wall time."
        ]
    priced = [p for p in plans if _usd(p) is not None]
    cheapest = min(priced, key=lambda p: _usd(p) or 0.0, default=None)
    if cheapest is None or cheapest is best or _usd(cheapest) == _usd(best):
        return []
    return [
        f"Cheapest shown: {_name(cheapest)} in {hours(cheapest.cost.wall_hours)} h, {_cost_versus(cheapest, best)}; "
        "--objective cost ranks by on-demand cost per run."
    ]
