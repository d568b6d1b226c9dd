"""No two modules of the package (or of migrate) need each other, directly or through
others: the layers only read one way when the imports do. import-linter's contracts name
the layers; this catches a cycle anywhere, including inside one layer.

Every import statement counts: one under ``if TYPE_CHECKING`` (a type the module cannot be
read without) and one inside a function (a dependency loaded late is still a dependency).
The pages ↔ server cycle this test was written against was of the first kind."""

from __future__ import annotations

import grimp

PACKAGES = ("gensokyo_idmap", "migrate")


def _cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """One cycle per set of modules found on one: each direct import a → b that b (through
    any chain) imports back closes the shortest cycle through that import."""
    found: dict[frozenset[str], tuple[str, ...]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycle = (importer, *back)
                found.setdefault(frozenset(cycle), cycle)
    return sorted(found.values())


def _where(graph: grimp.ImportGraph, cycle: tuple[str, ...]) -> str:
    lines = []
    for importer, imported in zip(cycle, cycle[1:], strict=False):
        for detail in graph.get_import_details(importer=importer, imported=imported)[:1]:
            lines.append(f"  {importer}:{detail['line_number']}: {detail['line_contents']}")
    return "\n".join(lines)


def test_no_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    cycles = _cycles(graph)
    assert cycles == [], "import cycles:\n" + "\n".join(
        " → ".join(cycle) + "\n" + _where(graph, cycle) for cycle in cycles)


def test_a_cycle_is_found() -> None:
    """The search itself: a graph with a cycle three modules long, and one beside it."""
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    graph.add_import(importer="p.d", imported="p.a")
    assert _cycles(graph) == [("p.a", "p.b", "p.c", "p.a")]
