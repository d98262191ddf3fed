"""Layering rules of src/gpuplan, checked on the source with ``ast`` (nothing is imported).

The folders are the layers, lowest first: ``core`` (pure) → ``data`` (bundled files and their readers)
→ ``adapters`` → ``usecases`` → ``interfaces`` (docs/architecture.md). A module may import its own
layer and the layers below it, never one above; no two packages import each other (directly or round a
longer loop); no module imports a private name (``_x``) from another package; the core reads no files
and uses no library beyond numpy, scipy and pydantic; each third-party front-end or I/O library stays in
the one folder made for it. The checkers are tested on small synthetic graphs too, so a rule that
stopped seeing edges would fail here rather than pass in silence.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "gpuplan"
LAYERS = ("core", "data", "adapters", "usecases", "interfaces")
"""Lowest first: a module may import from its own layer and those before it."""
ROOT_MODULES = {"gpuplan": 0, "gpuplan.__main__": len(LAYERS) - 1}
"""The two modules outside the folders: the package marker (imports nothing) and ``python -m gpuplan``."""
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50
CORE_THIRD_PARTY = {"numpy", "scipy", "pydantic", "pydantic_core"}
CORE_FORBIDDEN_STDLIB = {
    "os", "pathlib", "importlib", "io", "socket", "subprocess", "asyncio", "urllib", "http", "shutil",
    "tempfile", "sqlite3", "threading", "multiprocessing", "sys",
}  # fmt: skip
LIBRARY_HOMES = {
    "rich": ("gpuplan.interfaces.cli",),
    "typer": ("gpuplan.interfaces.cli",),
    "fastapi": ("gpuplan.interfaces.web",),
    "uvicorn": ("gpuplan.interfaces.web",),
    "starlette": ("gpuplan.interfaces.web",),
    "plotly": ("gpuplan.interfaces.plots",),
    "sqlalchemy": ("gpuplan.adapters.store",),
    "kubernetes": ("gpuplan.adapters.k8s",),
    "kubernetes_validate": ("gpuplan.adapters.k8s",),
    "torch": ("gpuplan.adapters.bench",),
    "transformers": ("gpuplan.adapters.bench",),
    "huggingface_hub": ("gpuplan.adapters.models",),
    "yaml": ("gpuplan.data", "gpuplan.adapters", "gpuplan.usecases", "gpuplan.interfaces"),
}
"""Third-party libraries and the folders that may import them (plus their subfolders)."""


@dataclass(frozen=True)
class Import:
    """One imported name: ``module`` (a gpuplan module or a library) and, for ``from m import n``, ``n``."""

    module: str
    name: str | None
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def package_of(module: str, packages: set[str] | None = None) -> str:
    """The package a module belongs to: itself for an ``__init__``, else its parent (root modules: themselves)."""
    if module in ROOT_MODULES or module in (
        packages if packages is not None else {m for m in MODULES if _is_package(m)}
    ):
        return module
    return module.rpartition(".")[0]


def parse_imports(source: str, module: str, *, is_package: bool) -> Iterator[Import]:
    """Every import in ``source``, lazy (in-function) ones included, relative ones resolved."""
    base = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                parts = base.split(".")
                target = ".".join(
                    parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else [])
                )
            if target != "__future__":
                for alias in node.names:
                    yield Import(target, alias.name, node.lineno)


def _imports(module: str) -> list[Import]:
    text = MODULES[module].read_text(encoding="utf-8")
    return list(parse_imports(text, module, is_package=_is_package(module)))


def resolve(imp: Import, modules: Iterable[str]) -> str | None:
    """The gpuplan module an import loads: ``from a import b`` is ``a.b`` when ``b`` is a submodule."""
    known = set(modules)
    if imp.name and f"{imp.module}.{imp.name}" in known:
        return f"{imp.module}.{imp.name}"
    return imp.module if imp.module in known else None


def layer_of(module: str) -> int:
    if module in ROOT_MODULES:
        return ROOT_MODULES[module]
    return LAYERS.index(module.split(".")[1])


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for imp in _imports(module):
            target = resolve(imp, MODULES)
            if target and target != module:
                graph[module].add(target)
    return graph


EDGES = _edges()


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_graph(edges: Mapping[str, Iterable[str]], packages: set[str]) -> dict[str, set[str]]:
    """Edges between packages; a package's ``__init__`` importing its own children is not an edge."""
    graph: dict[str, set[str]] = {}
    for module, targets in edges.items():
        source = package_of(module, packages)
        for target in targets:
            dest = package_of(target, packages)
            if dest != source and not (module in packages and dest.startswith(module + ".")):
                graph.setdefault(source, set()).add(dest)
    return graph


def upward_imports(edges: Mapping[str, Iterable[str]]) -> list[str]:
    return sorted(
        f"{module} ({LAYERS[layer_of(module)] if module not in ROOT_MODULES else 'root'}) imports {target}"
        for module, targets in edges.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )


def private_imports(
    module: str, imports: Iterable[Import], modules: set[str], packages: set[str]
) -> list[str]:
    """``from other.package import _name`` (a private name of a module outside this package)."""
    bad = []
    for imp in imports:
        target = resolve(imp, modules)
        if not target or not imp.name or not imp.name.startswith("_") or imp.name.startswith("__"):
            continue
        if f"{imp.module}.{imp.name}" in modules:
            continue  # importing a private submodule of a package is only allowed from inside it
        if package_of(target, packages) != package_of(module, packages):
            bad.append(f"{module}:{imp.line} imports {imp.name} from {target}")
    return bad


def _packages() -> set[str]:
    return {m for m in MODULES if _is_package(m)}


# --- the checkers see what they must (synthetic inputs) ------------------------------------------


def test_import_scanner_sees_lazy_and_relative_imports() -> None:
    source = "from .sibling import x\nfrom . import child\ndef f():\n    import gpuplan.core.units as u\n"
    found = {(i.module, i.name) for i in parse_imports(source, "gpuplan.core.perf.memory", is_package=False)}
    assert found == {
        ("gpuplan.core.perf.sibling", "x"),
        ("gpuplan.core.perf", "child"),
        ("gpuplan.core.units", None),
    }


def test_cycle_finder_reports_a_loop_through_three_packages_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_package_graph_folds_modules_into_their_packages() -> None:
    packages = {"gpuplan.x", "gpuplan.y"}
    edges = {"gpuplan.x": {"gpuplan.x.m"}, "gpuplan.x.m": {"gpuplan.y.n"}, "gpuplan.y.n": {"gpuplan.x.m"}}
    assert cycles(package_graph(edges, packages)) == [["gpuplan.x", "gpuplan.y"]]


def test_upward_import_is_flagged() -> None:
    assert upward_imports({"gpuplan.core.a": {"gpuplan.usecases.b"}}) == [
        "gpuplan.core.a (core) imports gpuplan.usecases.b"
    ]
    assert upward_imports({"gpuplan.usecases.b": {"gpuplan.core.a"}}) == []


def test_private_name_across_packages_is_flagged_but_not_inside_one() -> None:
    modules = {"gpuplan.core.a.m", "gpuplan.core.a.n", "gpuplan.core.b.k"}
    packages = {"gpuplan.core.a", "gpuplan.core.b"}
    imp = [Import("gpuplan.core.a.m", "_helper", 3)]
    assert private_imports("gpuplan.core.b.k", imp, modules, packages) == [
        "gpuplan.core.b.k:3 imports _helper from gpuplan.core.a.m"
    ]
    assert private_imports("gpuplan.core.a.n", imp, modules, packages) == []


def test_source_tree_is_found() -> None:
    assert {"gpuplan.core.perf.memory", "gpuplan.core.recommend", "gpuplan.interfaces.cli"} <= set(MODULES)
    assert "gpuplan.interfaces.cli.commands" in EDGES["gpuplan.interfaces.cli"]


# --- the rules on the real tree ------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_lives_in_a_layer_folder(module: str) -> None:
    assert module in ROOT_MODULES or module.split(".")[1] in LAYERS, (
        f"{module} is outside {', '.join(LAYERS)}; put it in the folder of its layer"
    )


def test_no_import_reaches_a_higher_layer() -> None:
    bad = upward_imports(EDGES)
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_no_cycle_between_packages() -> None:
    found = cycles(package_graph(EDGES, _packages()))
    assert not found, f"packages that import each other: {found}"


def test_no_cycle_between_modules() -> None:
    found = cycles(EDGES)
    assert not found, f"modules that import each other: {found}"


def test_no_private_name_imported_from_another_package() -> None:
    modules, packages = set(MODULES), _packages()
    bad = [line for m in MODULES for line in private_imports(m, _imports(m), modules, packages)]
    assert not bad, "\n".join(bad)


def _library(imp: Import) -> str:
    return imp.module.split(".")[0]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("gpuplan.core")))
def test_core_uses_no_io_and_no_library_but_numpy_scipy_pydantic(module: str) -> None:
    bad = sorted(
        {
            imp.module
            for imp in _imports(module)
            if _library(imp) != "gpuplan"
            and (_library(imp) in CORE_FORBIDDEN_STDLIB or _library(imp) in LIBRARY_HOMES)
        }
    )
    assert not bad, f"{module} imports {bad}: the core is pure (data comes in as arguments)"
    third = sorted({_library(i) for i in _imports(module)} - CORE_THIRD_PARTY - {"gpuplan"})
    stdlib = [lib for lib in third if lib not in __import__("sys").stdlib_module_names]
    assert not stdlib, f"{module} imports {stdlib}; the core may use numpy, scipy and pydantic only"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_library_stays_in_its_folder(module: str) -> None:
    bad = sorted(
        {
            _library(imp)
            for imp in _imports(module)
            if _library(imp) in LIBRARY_HOMES
            and not any(module == h or module.startswith(h + ".") for h in LIBRARY_HOMES[_library(imp)])
        }
    )
    assert not bad, f"{module} imports {bad}; see LIBRARY_HOMES for where each belongs"


def test_no_module_exceeds_line_limit() -> None:
    long = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def _long_functions(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                yield f"{_module_name(path)}.{node.name} ({length} lines)"


def test_no_function_exceeds_line_limit() -> None:
    long = [f for p in MODULES.values() for f in _long_functions(p)]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
