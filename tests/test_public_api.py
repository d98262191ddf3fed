"""The public API is what ``__all__`` says, in the style of httpx's ``tests/test_exported_members.py``.

Every package ``__init__`` under ``src/gpuplan`` (found on disk, so a new package is checked too)
declares a literal ``__all__``, and so may a plain module; every ``__all__`` there is (also found on
disk) is exact: each name in it exists, it has no duplicates and is in ruff's RUF022 ("isort-style")
order, and nothing public is bound at the top level without being in it (no accidental exports).
"Public" follows PEP 8: a name without a leading underscore that the module defines, or that it
imports without using it itself (a name imported only to be re-exported); a name it imports to use is
an implementation detail. A package that exports nothing says in its docstring where to import from
instead. A module whose names nobody imports (a CLI command module, loaded for its side effect of
registering commands) declares no ``__all__``.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = sorted(
    ".".join(init.parent.relative_to(SRC).parts) for init in (SRC / "gpuplan").rglob("__init__.py")
)


def _declares_all(path: Path) -> bool:
    return re.search(r"^__all__\b", path.read_text(encoding="utf-8"), re.MULTILINE) is not None


MODULES = sorted(
    ".".join(path.relative_to(SRC).with_suffix("").parts)
    for path in (SRC / "gpuplan").rglob("*.py")
    if path.name != "__init__.py" and _declares_all(path)
)
"""Plain (non-package) modules that declare ``__all__`` (a module need not; if it does, it is exact)."""
APIS = PACKAGES + MODULES

SCREAMING_CASE, CAMEL_CASE, OTHER_CASE = 0, 1, 2
"""The three groups of RUF022's order, in that order."""


def path_of(name: str, root: Path = SRC) -> Path:
    """The file of a module as Python finds it: a package (``x/__init__.py``) before a module (``x.py``);
    a plain folder ``x/`` (no ``__init__``, e.g. data files) does not hide a module ``x.py``."""
    base = root.joinpath(*name.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    raise FileNotFoundError(f"no module {name} under {SRC}")


def source_of(name: str) -> ast.Module:
    return ast.parse(path_of(name).read_text(encoding="utf-8"))


def declared_all(tree: ast.Module) -> list[str] | None:
    """The literal list of strings assigned to ``__all__`` at module level; ``None`` if there is none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value: ast.expr | None = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "__all__"
        ):
            value = node.value
        else:
            continue
        assert isinstance(value, ast.List), "__all__ must be a literal list"
        names = [element.value for element in value.elts if isinstance(element, ast.Constant)]
        assert all(isinstance(n, str) for n in names) and len(names) == len(value.elts), (
            "only string literals"
        )
        return [str(n) for n in names]
    return None


def _top_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run at import time, including those inside top-level ``if``/``try``/``with``."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If | ast.With):
            found += _top_level_statements(node.body + getattr(node, "orelse", []))
        elif isinstance(node, ast.Try):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            found += _top_level_statements(node.body + handlers + node.orelse + node.finalbody)
    return found


def _imported_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module != "__future__":
        return [alias.asname or alias.name for alias in node.names]
    if isinstance(node, ast.Import):
        return [alias.asname or alias.name.split(".")[0] for alias in node.names]
    return []


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, ast.AnnAssign)
        else []
    )
    return [t.id for t in targets if isinstance(t, ast.Name)]


def public_bindings(tree: ast.Module) -> set[str]:
    """Public names the module defines, and those it imports without using them (re-exports)."""
    statements = _top_level_statements(tree.body)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    defined = {name for node in statements for name in _defined_names(node)}
    reexported = {name for node in statements for name in _imported_names(node) if name not in used}
    return {name for name in defined | reexported if not name.startswith("_")}


def ruf022_key(name: str) -> tuple[int, list[tuple[int, int, str]]]:
    """RUF022's isort-style order: SCREAMING_CASE, then CamelCase, then the rest; within each, a
    case-sensitive natural order (digit runs compare as numbers)."""
    if len(name) > 1 and name == name.upper() != name.lower():
        group = SCREAMING_CASE
    elif name[:1].isupper():
        group = CAMEL_CASE
    else:
        group = OTHER_CASE
    return group, [
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.findall(r"\d+|\D", name)
    ]


def load(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:  # an optional extra that this environment lacks
        if exc.name is None or exc.name.split(".")[0] == "gpuplan":
            raise
        pytest.skip(f"{name} needs {exc.name}")


def exported(name: str) -> list[str]:
    names = declared_all(source_of(name))
    assert names is not None, f"{name} declares no __all__"
    return names


# --- the checker itself -----------------------------------------------------------------------------


def test_public_bindings_are_definitions_and_unused_imports() -> None:
    tree = ast.parse(
        "from __future__ import annotations\n"
        "import sys\n"
        "from a import Used, Reexported, _Private\n"
        "from b import c as d\n"
        "try:\n    from e import Optional\nexcept ImportError:\n    Optional = None\n"
        "LIMIT = 3\n_HIDDEN = 4\n"
        "def f(x: Used) -> None:\n    sys.exit(LIMIT)\n"
        "class K:\n    inner = 1\n"
    )
    assert public_bindings(tree) == {"LIMIT", "Optional", "Reexported", "d", "f", "K"}


def test_declared_all_reads_plain_and_annotated_lists_only() -> None:
    assert declared_all(ast.parse('__all__ = ["b", "a"]')) == ["b", "a"]
    assert declared_all(ast.parse("__all__: list[str] = []")) == []
    assert declared_all(ast.parse("x = 1")) is None
    with pytest.raises(AssertionError, match="literal list"):
        declared_all(ast.parse('__all__ = ("a",)'))


def test_ruf022_order() -> None:
    shuffled = ["x10", "GpuSpec", "__version__", "GIB", "x9", "A", "B16", "bf16", "B2", "fp16", "fp8", "_x"]
    expected = ["B2", "B16", "GIB", "A", "GpuSpec", "__version__", "_x", "bf16", "fp8", "fp16", "x9", "x10"]
    assert sorted(shuffled, key=ruf022_key) == expected


# --- every public API -------------------------------------------------------------------------------


def test_path_of_prefers_a_package_and_sees_a_module_past_a_data_folder(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "data").mkdir(parents=True)
    (tmp_path / "pkg" / "data.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "sub").mkdir()
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    assert path_of("pkg.data", tmp_path) == tmp_path / "pkg" / "data.py"
    assert path_of("pkg.sub", tmp_path) == tmp_path / "pkg" / "sub" / "__init__.py"
    assert path_of("pkg", tmp_path) == tmp_path / "pkg" / "__init__.py"
    with pytest.raises(FileNotFoundError):
        path_of("pkg.missing", tmp_path)


def test_every_package_and_module_with_all_is_found() -> None:
    assert {"gpuplan", "gpuplan.core", "gpuplan.core.model", "gpuplan.interfaces.cli"} <= set(PACKAGES)
    assert {"gpuplan.core.dtypes", "gpuplan.core.errors", "gpuplan.core.units"} <= set(MODULES)
    assert not set(MODULES) & set(PACKAGES)


@pytest.mark.parametrize("name", APIS)
def test_every_exported_name_exists(name: str) -> None:
    module = load(name)
    assert [n for n in exported(name) if not hasattr(module, n)] == []
    assert module.__all__ == exported(name)


@pytest.mark.parametrize("name", APIS)
def test_all_is_sorted_without_duplicates(name: str) -> None:
    names = exported(name)
    assert len(set(names)) == len(names), sorted(n for n in set(names) if names.count(n) > 1)
    assert names == sorted(names, key=ruf022_key)


@pytest.mark.parametrize("name", APIS)
def test_no_accidental_exports(name: str) -> None:
    assert sorted(public_bindings(source_of(name)) - set(exported(name))) == []


@pytest.mark.parametrize("name", [p for p in PACKAGES if declared_all(source_of(p)) == []])
def test_a_package_that_exports_nothing_says_where_to_import_from(name: str) -> None:
    docstring = ast.get_docstring(source_of(name)) or ""
    assert "import from" in docstring.lower(), docstring
