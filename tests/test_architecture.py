"""Layering rules of src/gpuplan, checked on the source with ``ast`` (nothing is imported).

The core (units, dtypes, errors, cost, perf, model arithmetic, recommend, catalog schema) must stay
free of the front ends (CLI, web, service, validation) and of their libraries, both directly and
through the gpuplan modules it imports; only ``gpuplan.interfaces.cli`` may use rich or typer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "gpuplan"
MAX_MODULE_LINES = 500

CORE_EXACT = {
    "gpuplan.core.units", "gpuplan.core.dtypes", "gpuplan.core.errors", "gpuplan.core.frozen", "gpuplan.core.cost", "gpuplan.core.model.arith",
    "gpuplan.core.model.spec", "gpuplan.core.hardware", "gpuplan.core.perf", "gpuplan.core.recommend", "gpuplan.core.sim",
    "gpuplan.core.fleet.spec", "gpuplan.core.fleet.pool_units", "gpuplan.core.fleet.sizing", "gpuplan.core.fleet.assign",
    "gpuplan.core.fleet.planner", "gpuplan.core.training.spec", "gpuplan.core.training.params", "gpuplan.core.training.flops",
    "gpuplan.core.training.memory", "gpuplan.core.training.activations", "gpuplan.core.training.comm", "gpuplan.core.training.step",
    "gpuplan.core.training.search", "gpuplan.core.training.plan",
}
CORE_PACKAGES = ("gpuplan.core.perf.", "gpuplan.core.recommend.", "gpuplan.core.sim.")
FORBIDDEN_IN_CORE = ("gpuplan.interfaces.cli", "gpuplan.interfaces.web", "gpuplan.usecases.service", "gpuplan.usecases.validation", "gpuplan.adapters.bench",
                     "gpuplan.adapters.store", "gpuplan.adapters.k8s", "gpuplan.interfaces.plots.serving", "rich", "typer", "fastapi", "httpx",
                     "sqlalchemy", "kubernetes", "plotly")
CLI_ONLY = ("rich", "typer")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_core(name: str) -> bool:
    return name in CORE_EXACT or name.startswith(CORE_PACKAGES)


def _matches(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _imports(module: str) -> Iterator[str]:
    """Every module name an import statement in ``module`` names, lazy (in-function) imports included.

    ``from a import b`` yields ``a`` and ``a.b`` (``b`` may be a submodule); relative imports are resolved.
    """
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "__future__":
                continue
            yield target
            for alias in node.names:
                yield f"{target}.{alias.name}"


def _internal_deps(module: str) -> set[str]:
    """gpuplan modules that importing ``module`` executes: each named module and its parent packages."""
    deps: set[str] = set()
    for name in _imports(module):
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in MODULES:
                deps.add(prefix)
    return deps


def _closure(module: str) -> dict[str, str]:
    """Every gpuplan module reachable from ``module``, mapped to the module that first imported it."""
    seen = {module: module}
    stack = [module]
    while stack:
        current = stack.pop()
        for dep in _internal_deps(current):
            if dep not in seen:
                seen[dep] = current
                stack.append(dep)
    return seen


def _chain(seen: dict[str, str], end: str) -> str:
    path = [end]
    while seen[path[-1]] != path[-1]:
        path.append(seen[path[-1]])
    return " -> ".join(reversed(path))


def test_source_tree_is_found() -> None:
    assert "gpuplan.core.perf.memory" in MODULES
    assert "gpuplan.core.recommend" in MODULES
    core = [m for m in MODULES if _is_core(m)]
    assert {"gpuplan.core.units", "gpuplan.core.cost", "gpuplan.core.perf.roofline", "gpuplan.core.recommend.search"} <= set(core)


def test_import_scanner_sees_lazy_and_relative_imports() -> None:
    # The validate command imports gpuplan.usecases.validation.service inside the function.
    assert "gpuplan.usecases.validation.service" in set(_imports("gpuplan.interfaces.cli.commands"))
    # catalog/__init__ uses "from .loader import ...".
    assert "gpuplan.adapters.catalog.loader" in _internal_deps("gpuplan.adapters.catalog")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _is_core(m)))
def test_core_module_does_not_import_front_ends_directly(module: str) -> None:
    bad = sorted({name for name in _imports(module) if _matches(name, FORBIDDEN_IN_CORE)})
    assert not bad, f"{module} imports {bad}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _is_core(m)))
def test_core_module_does_not_reach_front_ends_transitively(module: str) -> None:
    seen = _closure(module)
    bad = []
    for reached in seen:
        if _matches(reached, FORBIDDEN_IN_CORE):
            bad.append(_chain(seen, reached))
        for name in _imports(reached):
            if _matches(name, FORBIDDEN_IN_CORE) and not name.startswith("gpuplan."):
                bad.append(f"{_chain(seen, reached)} -> {name}")
    assert not bad, f"{module} reaches: {sorted(set(bad))}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_cli_uses_rich_or_typer(module: str) -> None:
    if _matches(module, ("gpuplan.interfaces.cli",)):
        return
    bad = sorted({name for name in _imports(module) if _matches(name, CLI_ONLY)})
    assert not bad, f"{module} imports {bad}; rendering belongs in gpuplan.interfaces.cli"


def test_no_module_exceeds_line_limit() -> None:
    long = {str(p.relative_to(SRC)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
