"""Serving predictions: physics brackets, monotonic trends, overload and scaling, on real specs."""

from __future__ import annotations

import itertools
import math

import pytest

from gpuplan.adapters.catalog.loader import default_catalog
from gpuplan.adapters.models.registry import get_model
from gpuplan.core.errors import InfeasibleError
from gpuplan.core.hardware import GpuSpec
from gpuplan.core.model.spec import ModelSpec
from gpuplan.core.perf import scenarios
from gpuplan.core.perf.inference import ReplicaModel, predict_inference
from gpuplan.core.perf.layout import Layout
from gpuplan.core.perf.roofline import StepModel
from gpuplan.core.workload import Workload
from gpuplan.data.bundled_calibration import default_calibration

LLAMA_8B_BF16_BYTES = 8_030_261_248 * 2
CAL = default_calibration()


@pytest.fixture(scope="module")
def step(llama8b: ModelSpec, h100: GpuSpec) -> StepModel:
    return StepModel.build(llama8b, h100, Layout(), default_calibration())


def _w(scenario: str, **kw: float) -> Workload:
    return Workload.model_validate({"scenario": scenario, "input_tokens": 512, "output_tokens": 128, **kw})


def test_single_tpot_within_physics_bracket(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # Batch-1 decode streams all weights once per token: 16.06e9 B / 3.35e12 B/s = 4.79 ms is the floor.
    floor = LLAMA_8B_BF16_BYTES / 3.35e12
    assert floor == pytest.approx(4.794e-3, rel=1e-3)
    pred = predict_inference(llama8b, h100, Layout(), _w("single"), cal=CAL)
    assert floor < pred.tpot_s <= 3 * floor
    assert pred.bound == "memory"
    assert pred.running_per_replica == 1.0
    # e2e = TTFT + 127 x TPOT; tokens/s = 128 / e2e.
    assert pred.e2e_s == pytest.approx(pred.ttft_s + 127 * pred.tpot_s)
    assert pred.output_tokens_per_s == pytest.approx(128 / pred.e2e_s)


def test_single_ttft_at_least_prefill_compute(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # 512 prompt tokens x 2 x 8.03e9 params (less the input embedding) >= 7.69e12 FLOPs at <= 989.5e12 FLOP/s.
    flops = 512 * 2 * (8_030_261_248 - 128_256 * 4096)
    pred = predict_inference(llama8b, h100, Layout(), _w("single"), cal=CAL)
    assert pred.ttft_s > flops / 989.5e12


def test_decode_grows_with_batch_and_context(step: StepModel) -> None:
    by_batch = [step.decode_s(batch=b, context=1024) for b in (1, 8, 64, 256, 1024)]
    assert by_batch == sorted(by_batch)
    assert by_batch[-1] > by_batch[0]
    by_ctx = [step.decode_s(batch=32, context=c) for c in (128, 1024, 8192, 65_536)]
    assert by_ctx == sorted(by_ctx)
    assert by_ctx[-1] > by_ctx[0]


def test_prefill_grows_with_prompt(step: StepModel) -> None:
    times = [step.prefill_s(tokens=p, prompt_tokens=p) for p in (16, 256, 2048, 16_384)]
    assert times == sorted(times)
    assert times[-1] > times[0]


def test_offline_beats_single(llama8b: ModelSpec, h100: GpuSpec) -> None:
    single = predict_inference(llama8b, h100, Layout(), _w("single"), cal=CAL)
    offline = predict_inference(llama8b, h100, Layout(), _w("offline"), cal=CAL)
    assert offline.output_tokens_per_s > 10 * single.output_tokens_per_s
    assert offline.running_per_replica > 1


def test_static_batch_amortises_weights(step: StepModel, llama8b: ModelSpec, h100: GpuSpec) -> None:
    one = predict_inference(llama8b, h100, Layout(), _w("static_batch", batch_size=1), cal=CAL)
    many = predict_inference(llama8b, h100, Layout(), _w("static_batch", batch_size=32), cal=CAL)
    assert many.output_tokens_per_s > 10 * one.output_tokens_per_s
    assert many.tpot_s >= one.tpot_s


def test_concurrency_beyond_capacity_queues(llama8b: ModelSpec) -> None:
    l4 = default_catalog().get_gpu("L4")
    replica = ReplicaModel.build(llama8b, l4, Layout(), context_tokens=2048 + 512, cal=CAL)
    w = Workload(scenario="concurrency", input_tokens=2048, output_tokens=512, concurrency=1)
    cap = replica.capacity(w)
    assert 1 < cap < 32  # a 24 GB L4 holds ~3.7 GiB of KV after 15 GiB of weights: about a dozen requests
    runs = {c: replica.run(w.model_copy(update={"concurrency": float(c)})) for c in (32, 64, 128)}
    ttfts = [runs[c][0] for c in (32, 64, 128)]
    assert ttfts == sorted(ttfts) and ttfts[0] < ttfts[-1]
    # Beyond capacity the running batch is capped: the same TPOT, throughput and running count.
    assert {round(runs[c][1], 12) for c in runs} == {round(runs[32][1], 12)}
    assert {runs[c][3] for c in runs} == {cap}
    # Little's law: 64 extra clients wait 64/N more cycles of N x 512 tokens -> 64 x 512 / throughput.
    tput = runs[64][2]
    assert runs[128][0] - runs[64][0] == pytest.approx(64 * 512 / tput, rel=1e-9)


def test_rate_tpot_grows_and_overload_is_inf(llama8b: ModelSpec, h100: GpuSpec) -> None:
    replica = ReplicaModel.build(llama8b, h100, Layout(), context_tokens=640, cal=CAL)
    offline_rps = replica.run(_w("offline"))[2] / 128
    tpots = []
    for rate in (1.0, 5.0, 10.0, 20.0):
        ttft, tpot, tok_s, _ = replica.run(_w("rate", rate_rps=rate))
        assert math.isfinite(ttft) and math.isfinite(tpot)
        # Open loop at steady state: served tokens = offered rate x output length.
        assert tok_s == pytest.approx(rate * 128)
        tpots.append(tpot)
    assert tpots == sorted(tpots) and tpots[0] < tpots[-1]
    assert offline_rps > 20.0
    for over in (1.5, 3.0):
        ttft, tpot, tok_s, _ = replica.run(_w("rate", rate_rps=over * offline_rps))
        assert ttft == math.inf and tpot == math.inf and tok_s == 0.0


def test_rate_scenario_through_predict(llama8b: ModelSpec, h100: GpuSpec) -> None:
    pred = predict_inference(llama8b, h100, Layout(replicas=2), _w("rate", rate_rps=10), cal=CAL)
    # 10 req/s split over 2 replicas; 10 x 128 tokens served in total.
    assert pred.output_tokens_per_s == pytest.approx(1280)
    assert pred.requests_per_s == pytest.approx(10)


def test_infeasible_names_gib(h100: GpuSpec) -> None:
    l4 = default_catalog().get_gpu("L4")
    with pytest.raises(InfeasibleError) as info:
        predict_inference(get_model("meta-llama/Llama-3.1-405B"), l4, Layout(), _w("single"), cal=CAL)
    msg = str(info.value)
    assert "GiB" in msg
    assert "L4" in msg
    # 405B params x 2 bytes ~ 756 GiB of weights alone against a ~20 GiB budget.
    need = float(msg.split("needs ")[1].split(" GiB")[0])
    assert 750 < need < 800
    assert info.value.exit_code == 2


def test_per_gpu_throughput_is_total_over_gpus(llama8b: ModelSpec, h100: GpuSpec) -> None:
    layout = Layout(tp=2, replicas=2)
    pred = predict_inference(llama8b, h100, layout, _w("concurrency", concurrency=64), cal=CAL)
    assert pred.num_gpus == 4
    assert pred.output_tokens_per_s_per_gpu == pytest.approx(pred.output_tokens_per_s / 4)
    assert pred.requests_per_s == pytest.approx(pred.output_tokens_per_s / 128)


def test_replicas_multiply_throughput(llama8b: ModelSpec, h100: GpuSpec) -> None:
    one = predict_inference(llama8b, h100, Layout(), _w("concurrency", concurrency=32), cal=CAL)
    three = predict_inference(llama8b, h100, Layout(replicas=3), _w("concurrency", concurrency=96), cal=CAL)
    # 96 clients over 3 replicas = 32 each: same latency, 3x the tokens.
    assert three.output_tokens_per_s == pytest.approx(3 * one.output_tokens_per_s, rel=1e-12)
    assert three.tpot_s == pytest.approx(one.tpot_s)
    assert three.ttft_s == pytest.approx(one.ttft_s)
    assert three.output_tokens_per_s_per_gpu == pytest.approx(one.output_tokens_per_s_per_gpu)


def test_tp_speeds_up_batch1_decode(llama8b: ModelSpec, h100: GpuSpec) -> None:
    tp1 = predict_inference(llama8b, h100, Layout(), _w("single"), cal=CAL)
    tp2 = predict_inference(llama8b, h100, Layout(tp=2), _w("single"), cal=CAL)
    assert tp2.tpot_s < tp1.tpot_s
    # ...but less than 2x: fixed overheads and all-reduces do not shrink.
    assert tp2.tpot_s > tp1.tpot_s / 2


def test_rate_ttft_adds_the_wait_for_the_step_in_progress(
    llama8b: ModelSpec, h100: GpuSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lone request (rate -> 0) costs exactly its prefill; under load an arrival also waits for the
    # step in progress: (1 - e^-N) x TPOT / 2 on top of the prefill share.
    replica = ReplicaModel.build(llama8b, h100, Layout(), context_tokens=640, cal=CAL)
    single_ttft, _, _, _ = replica.run(_w("single"))
    idle_ttft, _, _, _ = replica.run(_w("rate", rate_rps=1e-4))
    assert idle_ttft == pytest.approx(single_ttft, rel=1e-3)
    ttft, tpot, _, running = replica.run(_w("rate", rate_rps=10.0))
    monkeypatch.setattr(scenarios, "step_boundary_wait_s", lambda running, step_s: 0.0)
    no_wait_ttft, no_wait_tpot, _, _ = replica.run(_w("rate", rate_rps=10.0))
    assert running > 5
    # The wait feeds back into N through Little's law only through TTFT (one step in a long request).
    assert no_wait_tpot == pytest.approx(tpot, rel=0.02)
    assert ttft - no_wait_ttft == pytest.approx((1 - math.exp(-running)) * tpot / 2, rel=0.05)


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"])
def test_rate_ttft_never_falls_below_idle_nor_as_load_rises(model_id: str, h100: GpuSpec) -> None:
    # A prompt's first token waits for the whole step carrying it (its prefill plus the running
    # requests' decodes), not for its 1/N share of a packed chunk: TTFT is the idle prefill at
    # rate -> 0 and grows with the load (it used to fall to 0.8x the idle value at 2 req/s).
    model, layout = get_model(model_id), Layout(tp=2, weight_dtype="fp8")
    replica = ReplicaModel.build(model, h100, layout, context_tokens=384, cal=CAL)
    work = {"input_tokens": 128, "output_tokens": 256}
    idle, _, _, _ = replica.run(Workload(scenario="single", **work))
    previous = idle
    for rate in (0.01, 0.5, 1.0, 2.0, 3.0, 5.0):
        ttft, _, _, _ = replica.run(Workload(scenario="rate", rate_rps=rate, **work))
        assert ttft >= previous * (1 - 1e-9), (rate, ttft, previous)
        previous = ttft


def test_a_long_lone_prompt_is_prefilled_in_chunks(llama8b: ModelSpec, h100: GpuSpec) -> None:
    step = StepModel.build(llama8b, h100, Layout(), default_calibration())
    prompt = 2 * step.chunk_tokens + 100
    replica = ReplicaModel.build(llama8b, h100, Layout(), context_tokens=prompt + 10, cal=CAL)
    ttft, _, _, _ = replica.run(Workload(scenario="single", input_tokens=prompt, output_tokens=10))
    chunks = 2 * step.prefill_s(tokens=step.chunk_tokens, prompt_tokens=prompt) + step.prefill_s(
        tokens=100, prompt_tokens=prompt
    )
    assert ttft == pytest.approx(chunks, rel=1e-12)
    assert ttft > step.prefill_s(tokens=prompt, prompt_tokens=prompt)  # each chunk streams the weights


def test_fewer_requests_than_replicas_keep_only_that_many_busy(llama8b: ModelSpec, h100: GpuSpec) -> None:
    one = predict_inference(llama8b, h100, Layout(), _w("concurrency", concurrency=1), cal=CAL)
    for workload in (_w("concurrency", concurrency=1), _w("single")):
        alone = predict_inference(llama8b, h100, Layout(), workload, cal=CAL)
        four = predict_inference(llama8b, h100, Layout(replicas=4), workload, cal=CAL)
        assert four.output_tokens_per_s == pytest.approx(alone.output_tokens_per_s, rel=1e-12)
    two_of_four = predict_inference(
        llama8b, h100, Layout(replicas=4), _w("concurrency", concurrency=2), cal=CAL
    )
    assert two_of_four.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, rel=1e-12)


def test_a_static_batch_beyond_memory_is_infeasible(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # 4096 x 4096 tokens x 128 KiB (bf16 GQA KV) = 2 TiB: no 80 GB card holds it.
    workload = Workload(scenario="static_batch", input_tokens=2048, output_tokens=2048, batch_size=4096)
    with pytest.raises(InfeasibleError, match=r"static batch of 4,096 requests of 4,096 tokens does not fit"):
        predict_inference(llama8b, h100, Layout(), workload, cal=CAL)
    fits = workload.model_copy(update={"batch_size": 64})  # 32 GiB of KV
    assert predict_inference(llama8b, h100, Layout(), fits, cal=CAL).running_per_replica == 64


def test_closed_loop_is_spread_over_its_cycle(llama8b: ModelSpec, h100: GpuSpec) -> None:
    # One client is exactly the single-request path; 32 clients obey Little's law (N = λ·E2E), prefill
    # beside the decodes (TTFT near the lone prefill, far below a lock-step wave's 32 prefills) and slow
    # them (TPOT above the pure decode step), at the throughput of the offline wave model's accounting.
    replica = ReplicaModel.build(llama8b, h100, Layout(), context_tokens=640, cal=CAL)
    single = replica.run(_w("single"))
    one = replica.run(_w("concurrency", concurrency=1))
    assert one == pytest.approx(single, rel=1e-12)
    ttft, tpot, tokens_per_s, running = replica.run(_w("concurrency", concurrency=32))
    rate = tokens_per_s / 128
    assert rate * (ttft + 127 * tpot) == pytest.approx(running, rel=1e-9) and running == 32
    lone = replica.step.lone_prefill_s(512)
    assert lone <= ttft < 3 * lone
    assert tpot > replica.step.decode_s(batch=32, context=512 + 64)
    wave = 32 * scenarios.prefill_share_s(replica.step, replica.memory, _w("concurrency", concurrency=32), 32)
    wave_rate = 32 / (wave + 128 * replica.step.decode_s(batch=32, context=512 + 64))
    assert rate == pytest.approx(wave_rate, rel=0.05)


def test_closed_loop_past_the_prefill_budget_flattens_instead_of_falling(llama8b: ModelSpec) -> None:
    # Two-token answers to 128-token prompts on an A10 (vLLM, 2,048-token budget): the prompt budget caps
    # the loop, so throughput rises then stays flat as clients are added, and TTFT keeps rising.
    a10 = default_catalog().get_gpu("A10")
    replica = ReplicaModel.build(llama8b, a10, Layout(engine="vllm"), context_tokens=130, cal=CAL)
    runs = [
        replica.run(Workload(scenario="concurrency", input_tokens=128, output_tokens=2, concurrency=c))
        for c in (4, 8, 16, 32, 48, 64)
    ]
    rates = [r[2] for r in runs]
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(rates))
    assert [r[0] for r in runs] == sorted(r[0] for r in runs)


def test_one_token_answers_with_one_slot_queue_instead_of_slowing(llama8b: ModelSpec) -> None:
    # llama.cpp runs one sequence: a second client waits a whole prefill, and throughput stays the same.
    a10 = default_catalog().get_gpu("A10")
    replica = ReplicaModel.build(llama8b, a10, Layout(engine="llamacpp"), context_tokens=129, cal=CAL)
    one, two = (
        replica.run(Workload(scenario="concurrency", input_tokens=128, output_tokens=1, concurrency=c))
        for c in (1, 2)
    )
    assert two[2] == pytest.approx(one[2], rel=0.01)
    assert two[0] == pytest.approx(2 * one[0], rel=0.01)
