"""Every library through its public API, and every layer of ours through the one below's public
surface: no private module or name of a dependency is imported, no private attribute of a
dependency's object is read or assigned, and a private attribute of ours is used only in the
module that declares it (the package and the integrations, read as source).

The rule, for ``x._name`` (dunder names are public) where ``x`` is not ``self``, ``cls`` or
``super()``:

- flagged when ``x`` is, or is reached from, a name imported from another package (a module, a
  class or an object: ``httpx._config``, ``Settings._llm``, ``zlib._Decompress``);
- flagged when ``_name`` is one httpx or httpcore keeps private, or (above the core) one the
  core's clients keep: these names are common, and a module with a ``_pool`` or ``_send`` of
  its own must still not reach into another object's;
- otherwise flagged unless this module declares ``_name`` (a class of its own keeps it): a
  private attribute declared elsewhere is another module's business, ours or a dependency's.

One exception is listed, with its reason: :data:`FRIENDS`.

``getattr``/``setattr``/``hasattr``/``delattr`` with a private name in a string count the same.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Set
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("composo", "langchain_composo", "llama_index.evaluation.composo")
CORE = ROOT / "composo" / "_core"
CLIENT_MODULES = tuple(CORE / f"{name}.py" for name in ("base_client", "client", "async_client"))
# Modules whose private names the other modules of their package may use, and why.
FRIENDS = {
    # AgentTracer is public; the methods its feeds call (the span processor, record_interaction,
    # the OpenAI Agents processor) stay off its public face. The feeds are modules of their own
    # only so that OpenTelemetry and the agents SDK load when used.
    ROOT / "composo" / "tracing" / "_agent.py": ROOT / "composo" / "tracing",
}
# httpx's and httpcore's private attributes that our own classes have names for too.
HTTP_PRIVATE = {
    "_pool",
    "_network_backend",
    "_mounts",
    "_transport",
    "_ssl_context",
    "_connections",
}
# The standard library's documented names that begin with an underscore.
STDLIB_PUBLIC = {"_exit", "_replace", "_asdict", "_fields", "_field_defaults", "_make"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return any(module == o or module.startswith(o + ".") for o in OURS)


def _declared(tree: ast.AST) -> set[str]:
    """Names a module declares: its classes' attributes and methods, its own top-level names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _client_private() -> set[str]:
    return {n for path in CLIENT_MODULES for n in _declared(ast.parse(path.read_text()))}


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def violations(source: str, guarded: set[str], friends: Set[str] = frozenset()) -> Iterator[str]:
    """What ``source`` reaches that it should not, one line each (see the module's rule);
    ``friends`` are names of another module this one may use."""
    tree = ast.parse(source)
    declared = _declared(tree) | friends
    foreign: set[str] = set()  # names bound to another package's modules or objects
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    continue
                foreign.add((alias.asname or alias.name).split(".")[0])
                if any(_private(part) for part in alias.name.split(".")):
                    yield f"{node.lineno}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _ours(node.module) or node.module == "__future__":
                continue
            foreign.update(alias.asname or alias.name for alias in node.names)
            for alias in node.names:
                if any(_private(part) for part in [*node.module.split("."), alias.name]):
                    yield f"{node.lineno}: from {node.module} import {alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            receiver, name = node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            receiver, name = node.args[0], node.args[1].value
        else:
            continue
        if not _private(name) or name in STDLIB_PUBLIC:
            continue
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
            continue
        if isinstance(receiver, ast.Call) and getattr(receiver.func, "id", None) == "super":
            continue
        root = _root(receiver)
        where = f"{node.lineno}: {ast.unparse(receiver)}.{name}"
        if isinstance(root, ast.Name) and root.id in foreign:
            yield f"{where} (another package's)"
        elif name in guarded:
            yield f"{where} (httpx's, httpcore's or the core clients' own)"
        elif name not in declared:
            yield f"{where} (declared in another module)"


def _sources() -> Iterator[Path]:
    for base in ("composo", "integrations"):
        yield from sorted((ROOT / base).rglob("*.py"))


def test_nothing_private_of_a_dependency_or_of_another_module_is_used() -> None:
    client_private = _client_private()
    offenders = []
    for path in _sources():
        guarded = HTTP_PRIVATE if path.is_relative_to(CORE) else HTTP_PRIVATE | client_private
        friends = {
            name
            for module, package in FRIENDS.items()
            if path.is_relative_to(package) and path != module
            for name in _declared(ast.parse(module.read_text()))
        }
        for line in violations(path.read_text(), guarded, friends):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


@pytest.mark.parametrize(
    "source",
    [
        "import httpx\nhttpx._config.DEFAULT_LIMITS",
        "import httpx._config",
        "from httpx._config import DEFAULT_LIMITS",
        "from uvicorn import _types",
        "from llama_index.core import Settings\nSettings._llm",
        "from llama_index.core import Settings\nSettings._llm = None",
        "import zlib\nx: zlib._Decompress",
        "def f(client):\n    return client._send(1)",
        "def f(client):\n    return client._throttle.permits",
        "def f(settings):\n    return settings._api_key",
        "def f(client):\n    return getattr(client, '_api_key')",
        "class A:\n    def __init__(self):\n        self._pool = 1\n"
        "def f(http):\n    return http._pool",
        "class A:\n    def send(self):\n        return 1\n    def _send(self):\n        return 2\n"
        "def f(client):\n    return client._send(1)",
    ],
)
def test_the_rule_catches(source: str) -> None:
    assert list(violations(source, HTTP_PRIVATE | {"_send", "_throttle", "_api_key"})), source


@pytest.mark.parametrize(
    "source",
    [
        "class A:\n    def f(self, other: 'A'):\n        self._x = other._x",
        "class A:\n    _n = 0\n    @classmethod\n    def f(cls):\n        return cls._n",
        "class B(A):\n    def f(self):\n        return super()._g()",
        "import httpx\nhttpx.Client().__dict__",
        "import os\nos._exit(0)",
        "from composo._core import build\nbuild.check_options",
    ],
)
def test_the_rule_lets_pass(source: str) -> None:
    assert list(violations(source, HTTP_PRIVATE)) == [], source


def test_it_reads_every_module_of_ours() -> None:
    paths = {p.relative_to(ROOT).as_posix() for p in _sources()}
    assert "composo/_background.py" in paths
    assert "integrations/llamaindex/llama_index/evaluation/composo/evaluator.py" in paths
    assert sys.version_info >= (3, 10)
