"""Layering rules of src/gpuplan, checked on the source with ``ast`` (nothing is imported).

The folders are the layers, lowest first: ``core`` (pure) → ``data`` (bundled files and their readers)
→ ``adapters`` → ``usecases`` → ``interfaces`` (docs/architecture.md). A module may import its own
layer and the layers below it, never one above; no two packages import each other (directly or round a
longer loop); no module imports a private name (``_x``) or a private module (``_x.py``) from another
package; the core uses only the pure standard-library modules of ``CORE_STDLIB``, numpy, scipy and
pydantic, and calls no I/O builtin (``open``, ``print``, ``eval`` ...); every third-party library is
listed in ``LIBRARY_HOMES`` and stays in the folders named there. A module loaded by a string
(``importlib.import_module("x")``, ``__import__("x")``) counts as imported; a gpuplan module or a
computed name may not be loaded that way (the graph could not see it). The checkers are tested on small
synthetic inputs too, so a rule that stopped seeing what it checks would fail here rather than pass in
silence.
"""

from __future__ import annotations

import ast
import sys
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
CORE_STDLIB = {
    "__future__", "abc", "bisect", "collections", "copy", "csv", "dataclasses", "datetime", "difflib",
    "enum", "functools", "heapq", "itertools", "json", "math", "operator", "re", "statistics", "types",
    "typing",
}  # fmt: skip
"""The standard-library modules (and their submodules) a pure core may use: computation on values
only. ``csv``/``json`` parse text handed in as arguments; nothing here opens a file or a socket."""
CORE_FORBIDDEN_BUILTINS = {"open", "__import__", "exec", "eval", "compile", "input", "print", "breakpoint"}
"""Builtins that read, write or run code: the core gets its data as arguments and returns answers."""
STRING_IMPORTERS = {"importlib.import_module", "import_module", "__import__"}
"""Calls that import the module named by their first argument."""
EVERYWHERE = ("gpuplan",)
LIBRARY_HOMES = {
    "numpy": EVERYWHERE,
    "pydantic": EVERYWHERE,
    "pydantic_core": EVERYWHERE,
    "scipy": ("gpuplan.core",),
    "httpx": ("gpuplan.adapters",),
    "anyio": ("gpuplan.interfaces.web",),
    "kaleido": ("gpuplan.interfaces.plots",),
    "rich": ("gpuplan.interfaces.cli",),
    "typer": ("gpuplan.interfaces.cli",),
    "fastapi": ("gpuplan.interfaces.web",),
    "uvicorn": ("gpuplan.interfaces.web",),
    "prometheus_client": ("gpuplan.interfaces.web", "gpuplan.adapters.bench.load"),
    "starlette": ("gpuplan.interfaces.web",),
    "plotly": ("gpuplan.interfaces.plots",),
    "sqlalchemy": ("gpuplan.adapters.store",),
    "kubernetes": ("gpuplan.adapters.k8s",),
    "kubernetes_validate": ("gpuplan.adapters.k8s",),
    "torch": ("gpuplan.adapters.bench",),
    "transformers": ("gpuplan.adapters.bench",),
    "pyarrow": ("gpuplan.adapters.bench",),
    "huggingface_hub": ("gpuplan.adapters.models",),
    "yaml": ("gpuplan.data", "gpuplan.adapters", "gpuplan.usecases", "gpuplan.interfaces"),
}
"""Every third-party library gpuplan imports, and the folders that may import it (plus their
subfolders); a library missing here may be imported nowhere until it is given a home."""


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


def string_imports(tree: ast.AST) -> Iterator[tuple[int, str | None]]:
    """(line, module) of each ``importlib.import_module(...)``/``__import__(...)`` call; the module is
    ``None`` when it is computed (not one string literal)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in STRING_IMPORTERS:
            first = node.args[0] if node.args else None
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            yield node.lineno, str(first.value) if literal and isinstance(first, ast.Constant) else None


def parse_imports(source: str, module: str, *, is_package: bool) -> Iterator[Import]:
    """Every import in ``source``, lazy (in-function) ones and those by a string literal included,
    relative ones resolved."""
    base = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    for line, name in string_imports(tree):
        if name is not None:
            yield Import(name, None, line)
    for node in ast.walk(tree):
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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(
    module: str, imports: Iterable[Import], modules: set[str], packages: set[str]
) -> list[str]:
    """``from other.package import _name`` (a private name of a module outside this package), and any
    import of a private module (a ``_x`` path segment) from outside the package that holds it."""
    bad = []
    for imp in imports:
        target = resolve(imp, modules)
        if not target:
            continue
        segments = target.split(".")
        for i, segment in enumerate(segments):
            home = ".".join(segments[:i])
            if _is_private(segment) and not (module == home or module.startswith(home + ".")):
                bad.append(f"{module}:{imp.line} imports {target}, private to {home}")
        if target == f"{imp.module}.{imp.name}" or not imp.name or not _is_private(imp.name):
            continue  # a submodule (checked above), a whole module or a public name
        if package_of(target, packages) != package_of(module, packages):
            bad.append(f"{module}:{imp.line} imports {imp.name} from {target}")
    return bad


def _library(imp: Import) -> str:
    return imp.module.split(".")[0]


def core_impurities(source: str, imports: Iterable[Import]) -> list[str]:
    """What makes a core module impure: a library or standard module beyond the allowed ones, a call of
    an I/O or code-running builtin."""
    bad = [
        f"line {imp.line}: imports {imp.module}"
        for imp in imports
        if _library(imp) not in CORE_STDLIB | CORE_THIRD_PARTY | {"gpuplan"}
    ]
    calls = sorted(
        (node.lineno, node.col_offset, node.func.id)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in CORE_FORBIDDEN_BUILTINS
    )
    return bad + [f"line {line}: calls {name}()" for line, _, name in calls]


def misplaced_libraries(module: str, imports: Iterable[Import]) -> list[str]:
    """Third-party libraries this module imports outside their ``LIBRARY_HOMES`` (or with none there)."""
    bad = set()
    for imp in imports:
        library = _library(imp)
        if library == "gpuplan" or library in sys.stdlib_module_names:
            continue
        homes = LIBRARY_HOMES.get(library)
        if homes is None:
            bad.add(f"{library} (not in LIBRARY_HOMES)")
        elif not any(module == h or module.startswith(h + ".") for h in homes):
            bad.add(f"{library} (belongs in {', '.join(homes)})")
    return sorted(bad)


def string_import_violations(source: str) -> list[str]:
    """Loads by string that the import graph cannot follow: a gpuplan module, or a computed name."""
    return [
        f"line {line}: " + (f"imports {name} by a string" if name else "imports a computed module name")
        for line, name in string_imports(ast.parse(source))
        if name is None or name.split(".")[0] in ("gpuplan", "") or name.startswith(".")
    ]


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


def test_private_module_is_flagged_outside_its_package_however_it_is_imported() -> None:
    modules = {
        "gpuplan.adapters.catalog",
        "gpuplan.adapters.catalog._parse",
        "gpuplan.adapters.catalog.loader",
    }
    modules |= {"gpuplan.usecases.fit"}
    packages = {"gpuplan.adapters.catalog"}
    whole = [Import("gpuplan.adapters.catalog", "_parse", 4)]
    name_from_it = [Import("gpuplan.adapters.catalog._parse", "load_yaml", 5)]
    by_path = [Import("gpuplan.adapters.catalog._parse", None, 6)]
    for imports in (whole, name_from_it, by_path):
        line = imports[0].line
        assert private_imports("gpuplan.usecases.fit", imports, modules, packages) == [
            f"gpuplan.usecases.fit:{line} imports gpuplan.adapters.catalog._parse, private to gpuplan.adapters.catalog"
        ]
        assert private_imports("gpuplan.adapters.catalog.loader", imports, modules, packages) == []


def test_core_impurities_are_imports_beyond_the_allow_list_and_io_builtins() -> None:
    source = (
        "import math\nimport glob\nimport gzip\nfrom pkgutil import iter_modules\n"
        "from collections.abc import Sequence\nimport numpy as np\nfrom gpuplan.core.units import GIB\n"
        "def f(path):\n    print(path)\n    text = open(path).read()\n    return eval(text), math.sqrt(2)\n"
    )
    imports = list(parse_imports(source, "gpuplan.core.x", is_package=False))
    assert core_impurities(source, imports) == [
        "line 2: imports glob",
        "line 3: imports gzip",
        "line 4: imports pkgutil",
        "line 9: calls print()",
        "line 10: calls open()",
        "line 11: calls eval()",
    ]


def test_string_imports_are_edges_and_gpuplan_or_computed_ones_are_refused() -> None:
    source = (
        "import importlib\nfrom importlib import import_module\n"
        "def f(name):\n"
        "    importlib.import_module('gpuplan.usecases.fit')\n"
        "    import_module('plotly.graph_objects')\n"
        "    __import__('httpx')\n"
        "    importlib.import_module(name)\n"
    )
    found = {(i.module, i.line) for i in parse_imports(source, "gpuplan.core.x", is_package=False)}
    assert {("gpuplan.usecases.fit", 4), ("plotly.graph_objects", 5), ("httpx", 6)} <= found
    targets = (
        resolve(i, {"gpuplan.usecases.fit"})
        for i in parse_imports(source, "gpuplan.core.x", is_package=False)
    )
    edges = {"gpuplan.core.x": {target for target in targets if target is not None}}
    assert upward_imports(edges) == ["gpuplan.core.x (core) imports gpuplan.usecases.fit"]
    assert string_import_violations(source) == [
        "line 4: imports gpuplan.usecases.fit by a string",
        "line 7: imports a computed module name",
    ]


def test_a_library_outside_its_home_or_without_one_is_flagged() -> None:
    imports = [
        Import("httpx", None, 1),
        Import("uvicorn", "run", 2),
        Import("numpy", None, 3),
        Import("json", None, 4),
    ]
    imports.append(Import("requests", None, 5))
    assert misplaced_libraries("gpuplan.usecases.bench_serve", imports) == [
        "httpx (belongs in gpuplan.adapters)",
        "requests (not in LIBRARY_HOMES)",
        "uvicorn (belongs in gpuplan.interfaces.web)",
    ]
    assert misplaced_libraries("gpuplan.adapters.bench.load.metrics", imports[:1] + imports[2:4]) == []


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


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("gpuplan.core")))
def test_core_uses_no_io_and_no_library_but_numpy_scipy_pydantic(module: str) -> None:
    bad = core_impurities(MODULES[module].read_text(encoding="utf-8"), _imports(module))
    assert not bad, f"{module}: {bad}; the core is pure (data comes in as arguments; see CORE_STDLIB)"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_library_stays_in_its_folder(module: str) -> None:
    bad = misplaced_libraries(module, _imports(module))
    assert not bad, f"{module} imports {bad}; see LIBRARY_HOMES for where each belongs"


def test_no_gpuplan_module_or_computed_name_is_imported_by_a_string() -> None:
    bad = [
        f"{module} {line}"
        for module, path in MODULES.items()
        for line in string_import_violations(path.read_text(encoding="utf-8"))
    ]
    assert not bad, "import these with an import statement, which the layer checks can see:\n" + "\n".join(
        bad
    )


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
