"""Prompt and answer lengths of a validation row: its own, else its benchmark dataset's.

MLPerf rows name the dataset (``benchmark=`` in notes) but not the lengths;
``data/validation/server_datasets.yaml`` holds each dataset's means and, where the per-sample lengths
were available, their percentiles, with sources. The analytic model runs the means; the simulator
resamples the percentiles, because a P99 TTFT or TPOT under Poisson load is set by the long prompts
and the spread of answer lengths, which fixed lengths at the mean leave out.

Load-sweep rows that sampled a named dataset (``dataset=ShareGPT``) state their run's means only;
``data/validation/run_lengths.yaml`` holds the per-request length shape of a published run of the same
sampler, which the simulator resamples scaled to the row's means (``run_length_shape``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated

import yaml
from pydantic import Field, model_validator

from gpuplan.core.frozen import FrozenModel
from gpuplan.core.sim.workload import LengthDist
from gpuplan.data import read_bundled_text
from gpuplan.usecases.validation.cases import Case, Skip

Token = Annotated[int, Field(ge=1, le=10_000_000)]
"""A length in tokens, as the tables give them (whole, positive)."""


class DatasetLengths(FrozenModel):
    """One entry of ``server_datasets.yaml`` (see its header for the fields' meaning)."""

    benchmark: str
    dataset: str
    input_tokens_mean: int = Field(ge=1)
    output_tokens_mean: int = Field(ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    verified: bool
    source: str
    lengths_source: str | None = None
    input_tokens_percentiles: tuple[Token, ...] | None = Field(default=None, min_length=2)
    reference_output_tokens_percentiles: tuple[Token, ...] | None = Field(default=None, min_length=2)
    note: str = ""

    @model_validator(mode="after")
    def _both_percentile_lists(self) -> DatasetLengths:
        if (self.input_tokens_percentiles is None) != (self.reference_output_tokens_percentiles is None):
            raise ValueError(
                f"{self.benchmark}: give both input_tokens_percentiles and reference_output_tokens_percentiles, "
                "or neither"
            )
        return self

    def distributions(self) -> tuple[LengthDist, LengthDist] | None:
        """(prompt, answer) lengths to resample, or None without percentiles. The answers keep the
        reference answers' shape scaled to the generated mean, each capped at ``max_output_tokens``
        when set (the cap trims llama2-70b's answers to a mean of 292.9 for the table's 294)."""
        inputs, reference = self.input_tokens_percentiles, self.reference_output_tokens_percentiles
        if inputs is None or reference is None:
            return None
        scale = self.output_tokens_mean / (sum(reference) / len(reference))
        scaled = [max(round(v * scale), 1) for v in reference]
        cap = self.max_output_tokens or max(scaled)
        answers = tuple(min(v, cap) for v in scaled)
        return LengthDist(kind="empirical", values=inputs), LengthDist(kind="empirical", values=answers)


class RunLengths(FrozenModel):
    """One entry of ``run_lengths.yaml``: the length shape of a published run of a dataset sampler."""

    dataset: str
    sampler: str
    samples: int = Field(ge=1)
    source: str
    input_tokens_percentiles: tuple[Token, ...] = Field(min_length=2)
    output_tokens_percentiles: tuple[Token, ...] = Field(min_length=2)
    note: str = ""

    def scaled_to(self, input_mean: int, output_mean: int) -> tuple[LengthDist, LengthDist]:
        """(prompt, answer) distributions of this shape with the given means, each atom >= 1 token."""
        return _scaled(self.input_tokens_percentiles, input_mean), _scaled(
            self.output_tokens_percentiles, output_mean
        )


def _scaled(atoms: tuple[int, ...], mean: int) -> LengthDist:
    scale = mean / (sum(atoms) / len(atoms))
    return LengthDist(kind="empirical", values=tuple(max(round(v * scale), 1) for v in atoms))


@lru_cache(maxsize=1)
def _run_lengths() -> dict[str, RunLengths]:
    text = read_bundled_text("validation", "run_lengths.yaml")
    entries = (RunLengths.model_validate(e) for e in yaml.safe_load(text))
    return {e.dataset.lower(): e for e in entries}


def run_length_shape(case: Case) -> RunLengths | None:
    """The length shape of the dataset a row's run sampled (``dataset=`` in its notes), if the table has it."""
    named = case.note("dataset")
    return _run_lengths().get(named.strip().lower()) if named else None


@lru_cache(maxsize=1)
def _datasets() -> dict[str, DatasetLengths]:
    text = read_bundled_text("validation", "server_datasets.yaml")
    entries = (DatasetLengths.model_validate(e) for e in yaml.safe_load(text))
    return {e.benchmark: e for e in entries}


def dataset_of(case: Case) -> DatasetLengths | None:
    """The benchmark dataset a row names (``benchmark=`` in its notes), if the table has it."""
    bench = re.search(r"benchmark=([\w.-]+)", case.get("notes"))
    return _datasets().get(bench.group(1)) if bench else None


def row_lengths(case: Case) -> tuple[int, int]:
    """(input, output) tokens: a named MLPerf benchmark's dataset means, else the row's own.

    An MLPerf row's lengths are its transcription of the same dataset property the table holds
    with its source, so the table wins: the llama2-70b rows quote 265 output tokens, the accuracy
    check's lower bound, where the benchmark's reference mean is 294.45 (see the table's note).
    """
    inp, out = case.int_field("input_len"), case.int_field("output_len")
    table = dataset_of(case)
    if table is not None:
        inp, out = table.input_tokens_mean, table.output_tokens_mean
    if inp is None or not out:
        raise Skip("input/output lengths not stated and no dataset table entry")
    return inp, out
