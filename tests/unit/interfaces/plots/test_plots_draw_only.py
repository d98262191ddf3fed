"""The plots only draw: at run time a plots module imports from gpuplan only what ``RUNTIME_ALLOWED``
lists (errors, units, a per-request metric, a constant, the plots package itself), so no predictor,
search, simulator, planner or use case can slip in (tests/test_architecture.py checks the layers, not
this). A module loaded by a string (``importlib.import_module("...")``) counts as imported.

Read from the source with ``ast``, so plotly need not be installed. Names imported under
``if TYPE_CHECKING:`` never exist at run time; there they may come from anywhere in gpuplan but must be
classes (the answers drawn).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path

import gpuplan.interfaces.plots

PLOTS_DIR = Path(gpuplan.interfaces.plots.__file__).parent
PLOTS_PACKAGE = "gpuplan.interfaces.plots"
RUNTIME_ALLOWED: dict[str, set[str] | None] = {
    "gpuplan.core.errors": None,
    "gpuplan.core.units": None,
    "gpuplan.core.sim.metrics": {"per_request_s"},
    "gpuplan.usecases.recommend": {"SCALING_GPU_COUNTS"},
}
"""The gpuplan modules a plots module may import at run time, with the names it may take from each
(``None``: any name; whole modules and submodules are not allowed unless ``None``). The plots package
itself is allowed too."""


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


def _imports(tree: ast.Module, package: str) -> list[tuple[ast.stmt | ast.expr, str, str | None]]:
    """(node, absolute module, imported name or None for a whole module) of every import, including
    ``importlib.import_module("...")`` calls (a computed name is reported as ``<computed>``)."""
    found: list[tuple[ast.stmt | ast.expr, str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "__import__"):
            first = node.args[0] if node.args else None
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            found.append(
                (
                    node,
                    str(first.value) if literal and isinstance(first, ast.Constant) else "<computed>",
                    None,
                )
            )
        elif isinstance(node, ast.Import):
            found += [(node, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            found += [(node, base, alias.name) for alias in node.names]
    return found


def _allowed_at_run_time(module: str, name: str | None) -> bool:
    """Is this run-time import a library, the plots package or one of ``RUNTIME_ALLOWED``?"""
    if module == "<computed>":
        return False
    if module.split(".")[0] != "gpuplan":
        return True  # a library (tests/test_architecture.py checks where each may be used)
    if _within(module, PLOTS_PACKAGE):
        return True
    if module not in RUNTIME_ALLOWED:
        return False
    names = RUNTIME_ALLOWED[module]
    return names is None or name in names


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
        elif not _allowed_at_run_time(module, name):
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
from gpuplan.core.training.step import step_time
from gpuplan.core.training.memory import training_memory
from gpuplan.core.sim import capacity
from gpuplan.core.fleet.planner import plan_fleet
from gpuplan import usecases
import importlib
perf = importlib.import_module("gpuplan.core.perf")
lib = importlib.import_module(name)
from gpuplan.core.sim.metrics import per_request_s
from gpuplan.core.errors import UserInputError
from gpuplan.interfaces.plots.serving import Point
plotly = importlib.import_module("plotly.graph_objects")
"""
    assert draw_only_violations(source) == [
        "line 3: gpuplan.core.perf.inference.predict_inference",
        "line 4: gpuplan.core.sim.simulator",
        "line 5: gpuplan.core.training.search",
        "line 6: gpuplan.usecases.recommend",
        "line 7: gpuplan.usecases.recommend.throughput_scaling",
        "line 8: gpuplan.usecases.recommend.ScalingPoint",
        "line 12: gpuplan.usecases.train.plan_training (under TYPE_CHECKING only classes are named)",
        "line 14: gpuplan.core.recommend.recommend",
        "line 15: gpuplan.core.training.step.step_time",
        "line 16: gpuplan.core.training.memory.training_memory",
        "line 17: gpuplan.core.sim.capacity",
        "line 18: gpuplan.core.fleet.planner.plan_fleet",
        "line 19: gpuplan.usecases",
        "line 21: gpuplan.core.perf",
        "line 22: <computed>",
    ]
