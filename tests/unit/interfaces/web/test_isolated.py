"""Web requests computed in a killable child: answers and errors come back whole, and nothing runs
after the time limit (issue 22: a request past its 422 kept a core busy for ~45 s)."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel, Field, ValidationError

from gpuplan.core.errors import InfeasibleError, UnknownNameError
from gpuplan.interfaces.web import isolated

pytestmark = pytest.mark.skipif(not isolated.FORK_AVAILABLE, reason="fork is POSIX-only")


class _Positive(BaseModel):
    x: int = Field(ge=1)


def test_the_answer_comes_back_from_the_child() -> None:
    parent = os.getpid()
    pid, value = anyio.run(lambda: isolated.bounded(lambda: (os.getpid(), 6 * 7), limit_s=10))
    assert value == 42 and pid != parent  # computed in another process


@pytest.mark.parametrize(
    "error",
    [
        UnknownNameError("GPU", "H10", ["H100-SXM"], hint="run 'gpuplan gpus'"),
        InfeasibleError("none", nearest=["a"]),
    ],
)
def test_errors_cross_the_process_boundary_whole(error: Exception) -> None:
    def fail() -> None:
        raise error

    with pytest.raises(type(error)) as info:
        anyio.run(lambda: isolated.bounded(fail, limit_s=10))
    assert str(info.value) == str(error) and info.value.__dict__ == error.__dict__


def test_a_validation_error_keeps_its_details() -> None:
    with pytest.raises(ValidationError) as info:
        anyio.run(lambda: isolated.bounded(lambda: _Positive(x=0), limit_s=10))
    assert info.value.errors()[0]["loc"] == ("x",)


def test_an_outcome_that_does_not_pickle_is_recomputed_in_a_thread() -> None:
    def five() -> int:
        return 5

    made = anyio.run(lambda: isolated.bounded(lambda: five, limit_s=10))
    assert made is five  # a local function does not pickle: the parent's thread recomputed it


def test_work_past_the_limit_is_killed(tmp_path: Path) -> None:
    """The child writes its pid, then spins; at the limit it is gone, not abandoned."""
    pid_file = tmp_path / "pid"

    def spin() -> None:
        pid_file.write_text(str(os.getpid()))
        while True:
            pass

    started = time.monotonic()
    with pytest.raises(TimeoutError):
        anyio.run(lambda: isolated.run_killable(spin, limit_s=0.5))
    assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    assert multiprocessing.active_children() == []


def test_a_child_that_dies_is_an_error_not_recomputed_in_the_server() -> None:
    """Review M5: a child killed from outside (the OOM killer) or crashed must not have its work
    redone in the server's own process."""
    parent = os.getpid()
    ran_in: list[int] = []

    def crash() -> int:
        ran_in.append(os.getpid())
        if os.getpid() != parent:
            os._exit(1)
        return 5

    with pytest.raises(isolated.ChildDied):
        anyio.run(lambda: isolated.bounded(crash, limit_s=10))
    assert parent not in ran_in
