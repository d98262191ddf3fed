"""GuideLLM's sweep (``--profile sweep``): its levels' loads, the rates between the synchronous and the
saturation rate, and the ``--profile``/``--rate N`` flags (no network: a fake runner)."""

from __future__ import annotations

import pytest

from gpuplan.adapters.bench.load import flags, sweep_profile
from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.summary import BenchSummary, summarise
from gpuplan.core.errors import BenchmarkError, UserInputError


def _config(**kw: object) -> LoadConfig:
    base: dict[str, object] = {
        "url": "http://127.0.0.1:1",
        "model": "m",
        "rate_rps": 1.0,
        "duration_s": 10.0,
        "input_tokens": 16,
        "output_tokens": 8,
    }
    return LoadConfig.model_validate(base | kw)


def _summary(config: LoadConfig, achieved_rps: float, sent: int, completed: int) -> BenchSummary:
    return summarise("r", config, []).model_copy(
        update={"achieved_rate_rps": achieved_rps, "requests_sent": sent, "requests_completed": completed}
    )


class FakeServer:
    """A server of ``slots`` requests at once, ``service_s`` each: one at a time it completes
    1/service_s req/s, saturated slots/service_s; an open loop gets what it offers up to that."""

    def __init__(self, service_s: float = 0.05, slots: int = 4) -> None:
        self.service_s, self.slots = service_s, slots
        self.configs: list[LoadConfig] = []

    def __call__(self, config: LoadConfig) -> BenchSummary:
        self.configs.append(config)
        capacity_rps = self.slots / self.service_s
        if config.concurrency is not None:
            rate = min(config.concurrency, self.slots) / self.service_s
            return _summary(config, rate, 100, 100)
        if config.all_at_once:
            return _summary(config, capacity_rps, 100, 100)
        assert config.rate_rps is not None
        return _summary(config, config.rate_rps, 100, 100 if config.rate_rps <= capacity_rps else 90)


def test_rates_between_are_guidellms_linspace_less_its_first_point() -> None:
    assert sweep_profile.rates_between(2.0, 10.0, 6) == pytest.approx([4.0, 6.0, 8.0, 10.0])
    assert sweep_profile.rates_between(20.0, 80.0, 3) == pytest.approx([80.0])


def test_a_sweep_runs_synchronous_then_saturation_then_the_rates_between() -> None:
    server = FakeServer(service_s=0.05, slots=4)  # 20 req/s one at a time, 80 req/s saturated
    result = sweep_profile.profile_sweep(_config(metadata={"tp": "2"}), server, size=5)
    assert result.synchronous_rate_rps == pytest.approx(20.0)
    assert result.saturation_rate_rps == pytest.approx(80.0)
    assert result.rates_rps == pytest.approx([40.0, 60.0, 80.0])
    first, second, *rates = server.configs
    assert (first.mode, first.concurrency, first.max_concurrency) == ("concurrency", 1, None)
    assert (second.mode, second.concurrency) == ("concurrency", sweep_profile.THROUGHPUT_CONCURRENCY)
    assert [c.rate_rps for c in rates] == pytest.approx([40.0, 60.0, 80.0])
    assert all(c.mode == "rate" for c in rates)
    assert [level.level for level in result.levels] == [
        "synchronous",
        "throughput",
        "rate 1/3",
        "rate 2/3",
        "rate 3/3",
    ]
    assert {c.metadata["sweep"] for c in server.configs} == {result.sweep_id}  # one id for every level
    assert [c.metadata["sweep_level"] for c in server.configs] == [lv.level for lv in result.levels]
    assert all(c.metadata["tp"] == "2" for c in server.configs)  # the user's metadata is kept


def test_count_bounded_saturation_is_a_capped_burst_and_counts_completions_only() -> None:
    server = FakeServer()
    result = sweep_profile.profile_sweep(
        _config(num_prompts=100, max_concurrency=16, warmup_s=1.0), server, 4
    )
    burst = server.configs[1]
    assert (burst.mode, burst.max_concurrency, burst.num_prompts, burst.warmup_s) == ("burst", 16, 100, 0.0)
    assert all(c.max_concurrency == 16 for c in server.configs[2:])  # the cap holds at every rate
    # an open loop's achieved rate counts sends: 90 of 100 completed at 80 req/s offered = 72 completed/s
    over = _summary(_config(rate_rps=80.0), 80.0, 100, 90)
    assert sweep_profile.completed_rate_rps(over) == pytest.approx(72.0)
    assert result.levels[-1].rate_rps == pytest.approx(80.0)


def test_a_saturation_level_that_completed_nothing_stops_the_sweep() -> None:
    def dead(config: LoadConfig) -> BenchSummary:
        return _summary(
            config, 0.0 if config.concurrency != 1 else 5.0, 10, 0 if config.concurrency != 1 else 10
        )

    with pytest.raises(BenchmarkError, match="throughput level completed no request"):
        sweep_profile.profile_sweep(_config(), dead, size=4)
    with pytest.raises(ValueError, match="3 to 100 levels, got 2"):
        sweep_profile.profile_sweep(_config(), FakeServer(), size=2)


def test_profile_flags_read_rate_as_the_number_of_levels() -> None:
    assert flags.sweep_size(None, 5.0, False) is None
    assert flags.sweep_size("sweep", None, False) == sweep_profile.DEFAULT_SWEEP_SIZE == 10
    assert flags.sweep_size("Sweep", 6.0, False) == 6
    cases = {
        ("sweep", 2.5, False): "--rate 2.5 with --profile sweep is the number of levels",
        ("sweep", 2.0, False): "a whole number from 3 to 100",
        ("sweep", None, True): "drop --request-rate inf",
        ("throughput", None, False): "GuideLLM's throughput is --request-rate inf --num-prompts N",
        ("fast", None, False): "--profile 'fast': the only profile is sweep",
    }
    for (profile, rate, inf), message in cases.items():
        with pytest.raises(UserInputError, match=message.replace("(", r"\(").replace(".", r"\.")):
            flags.sweep_size(profile, rate, inf)
