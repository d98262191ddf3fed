"""The plots only draw: no plots module imports the predictor, the planner's search, the simulator,
the training layout search, or a use case's compute function (tests/test_architecture.py checks
the layers, not this).

Read from the source with ``ast``, so plotly need not be installed. Names imported under
``if TYPE_CHECKING:`` never exist at run time; there they must be classes (the answers drawn).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path

import gpuplan.interfaces.plots

PLOTS_DIR = Path(gpuplan.interfaces.plots.__file__).parent
COMPUTE_MODULES = (
    "gpuplan.core.perf",
    "gpuplan.core.recommend",
    "gpuplan.core.sim.simulator",
    "gpuplan.core.training.search",
)
"""Modules (and their submodules) that predict, search or simulate."""
USECASES = "gpuplan.usecases"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _type_checking_nodes(tree: ast.Module) -> set[ast.AST]:
    """Every node inside an ``if TYPE_CHECKING:`` block."""
    inside: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.body:
                inside.update(ast.walk(child))
    return inside


def _imports(tree: ast.Module, package: str) -> list[tuple[ast.stmt, str, str | None]]:
    """(statement, absolute module, imported name or None for ``import module``) of every import."""
    found: list[tuple[ast.stmt, str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            found += [(node, base, alias.name) for alias in node.names]
    return found


def _compute_import(module: str, name: str | None) -> bool:
    """Does this run-time import bring in something that computes?"""
    full = f"{module}.{name}" if name else module
    if any(_within(module, m) or _within(full, m) for m in COMPUTE_MODULES):
        return True
    if not _within(module, USECASES):
        return False
    if name is None:
        return True  # the whole use-case module, compute functions and all
    value = getattr(importlib.import_module(module), name, None)
    return value is None or inspect.ismodule(value) or (callable(value) and not inspect.isclass(value))


def draw_only_violations(source: str, package: str = "gpuplan.interfaces.plots") -> list[str]:
    """What a plots module (``source``) imports that it must not, one line each."""
    tree = ast.parse(source)
    typing_only = _type_checking_nodes(tree)
    out = []
    for node, module, name in sorted(_imports(tree, package), key=lambda found: found[0].lineno):
        what = f"line {node.lineno}: {module}" + (f".{name}" if name else "")
        if node in typing_only:
            value = getattr(importlib.import_module(module), name, None) if name else None
            if not inspect.isclass(value):
                out.append(f"{what} (under TYPE_CHECKING only classes are named)")
        elif _compute_import(module, name):
            out.append(what)
    return out


def test_the_plots_modules_import_no_computation() -> None:
    modules = sorted(PLOTS_DIR.glob("*.py"))
    assert {p.name for p in modules} >= {"serving.py", "training.py"}
    bad = {p.name: draw_only_violations(p.read_text(encoding="utf-8")) for p in modules}
    assert {name: lines for name, lines in bad.items() if lines} == {}


def test_the_check_catches_each_kind_of_compute_import() -> None:
    source = """
from typing import TYPE_CHECKING
from gpuplan.core.perf.inference import predict_inference
import gpuplan.core.sim.simulator
from gpuplan.core.training import search
from gpuplan.usecases import recommend
from gpuplan.usecases.recommend import throughput_scaling
from gpuplan.usecases.recommend import ScalingPoint, SCALING_GPU_COUNTS
from gpuplan.core.units import GIB
if TYPE_CHECKING:
    from gpuplan.core.recommend.request import Recommendation
    from gpuplan.usecases.train import plan_training
def lazy():
    from gpuplan.core.recommend import recommend
"""
    assert draw_only_violations(source) == [
        "line 3: gpuplan.core.perf.inference.predict_inference",
        "line 4: gpuplan.core.sim.simulator",
        "line 5: gpuplan.core.training.search",
        "line 6: gpuplan.usecases.recommend",
        "line 7: gpuplan.usecases.recommend.throughput_scaling",
        "line 12: gpuplan.usecases.train.plan_training (under TYPE_CHECKING only classes are named)",
        "line 14: gpuplan.core.recommend.recommend",
    ]
