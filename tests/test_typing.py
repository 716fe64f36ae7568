"""Every public function of the hspz package carries type hints (the style rule), so that mypy
(`make lint`) checks its callers.

Public: a module-level function or a method of a public class whose name has no leading
underscore (dunder methods count, `__init__` included). Numba kernels (`@njit`, `@intrinsic`) are
left out: numba types them from their arguments and ignores hints.
"""

import ast
from pathlib import Path

import hspz

PACKAGE = Path(hspz.__file__).parent
UNTYPED_DECORATORS = {"njit", "intrinsic"}


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def _is_public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _missing(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    args = node.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if method and params and "staticmethod" not in _decorator_names(node):
        params = params[1:]  # self / cls
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    gaps = [p.arg for p in params if p.annotation is None]
    if node.returns is None and node.name != "__init__":  # __init__ returns None, always
        gaps.append("return")
    return gaps


def _public_functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, False
        elif isinstance(node, ast.ClassDef) and _is_public(node.name):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield item, True


def untyped_public_functions(package: Path = PACKAGE) -> list[str]:
    """`file:line name: missing` for each public function under `package` that lacks a hint."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node, method in _public_functions(tree):
            if not _is_public(node.name) or _decorator_names(node) & UNTYPED_DECORATORS:
                continue
            gaps = _missing(node, method)
            if gaps:
                where = f"{path.relative_to(package.parent)}:{node.lineno}"
                found.append(f"{where} {node.name}: {', '.join(gaps)}")
    return found


def test_every_public_function_has_type_hints():
    assert untyped_public_functions() == []


def test_the_check_sees_a_missing_hint(tmp_path):
    """The checker itself fails on an untyped public function and passes a private or jitted one."""
    (tmp_path / "m.py").write_text(
        "from numba import njit\n"
        "def typed(a: int, *b: int, c: str = '', **d: int) -> None: ...\n"
        "def untyped(a, b: int): ...\n"
        "def _private(a): ...\n"
        "@njit\ndef kernel(a): ...\n"
        "class C:\n    def __init__(self, x) -> None: ...\n    def ok(self) -> int: ...\n"
        "class _Hidden:\n    def f(self, x): ...\n"
    )
    found = untyped_public_functions(tmp_path)
    assert [line.split(" ", 1)[1] for line in found] == ["untyped: a, return", "__init__: x"]
