"""The pure parts load no backend: the identity model, the graph rules and the message-id
rules are usable (and testable) without lmdb or prometheus_client, which only the stores and
the metrics module bring. Checked in a fresh interpreter, so this process's imports do not
count."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import gensokyo_idmap

PACKAGE = Path(gensokyo_idmap.__file__).parent

MODULES = ["gensokyo_idmap.identity", "gensokyo_idmap.idmap", "gensokyo_idmap.runtime.msgid", "gensokyo_idmap.counters",
           "gensokyo_idmap.store.base"]
CASES = [(module, backend) for module in MODULES for backend in ("lmdb", "prometheus_client")]


@pytest.mark.parametrize(("module", "backend"), CASES)
def test_pure_module_loads_no_backend(module: str, backend: str) -> None:
    probe = f"import sys, {module}; print({backend!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "False", f"importing {module} loads {backend}"


def test_public_names_still_load_on_use() -> None:
    probe = ("import sys, gensokyo_idmap as g; assert 'lmdb' not in sys.modules; "
             "print(g.LmdbIdentityStore.__module__, g.IdentityGraph.__module__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["gensokyo_idmap.store.lmdb.identity", "gensokyo_idmap.idmap"]


def test_ops_imports_no_private_name_of_store() -> None:
    """ops/ works on store files through what store/ and runtime/ export, not their
    internals."""
    private = []
    for path in sorted((PACKAGE / "ops").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    ("gensokyo_idmap.store", "gensokyo_idmap.runtime")):
                private += [f"{path.name}: {node.module}.{alias.name}"
                            for alias in node.names if alias.name.startswith("_")]
    assert private == []
