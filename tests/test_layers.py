"""Imports go only downward: no module of bigtopics imports, at its top or inside a function, one
that imports it back; features reach a cluster through the cluster layer, never through the
training executor. Read from the source (ast), so the test sees every import, not only those a
run happens to take."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bigtopics"
# Imports inside a function that are not there to hide a circle: the CLI imports each command's
# engine when the command runs (so that `--help` is quick), and the Dask executor imports the
# tasks its workers run only when it is built (importing them needs the optional Dask).
LAZY_ON_PURPOSE = {"bigtopics.cli", "bigtopics.executors.dask"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[str, bool]]]:
    """module -> [(module it imports, whether at the module's top level)] for imports of bigtopics."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                if node.module:
                    found.append((".".join(base + [node.module]), id(node) in top))
                else:  # from . import a, b: the submodules
                    found.extend((".".join(base + [alias.name]), id(node) in top) for alias in node.names)
            elif isinstance(node, ast.Import):
                found.extend((alias.name, id(node) in top) for alias in node.names
                             if alias.name.startswith("bigtopics."))
        graph[name] = found
    return graph


GRAPH = _imports()


def _reached(start: str) -> set[str]:
    """The modules `start` imports at their tops, transitively (packages' __init__ not followed
    from their submodules: importing a.b runs a/__init__, but that is the package's API, not a
    dependency of a.b's code)."""
    seen, todo = set(), [start]
    while todo:
        for target, at_top in GRAPH.get(todo.pop(), ()):
            if at_top and target in GRAPH and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_no_module_imports_one_that_imports_it_back():
    circles = sorted(f"{name} <-> {other}" for name in GRAPH for other in _reached(name)
                     if name in _reached(other) and name < other and not other.startswith(name + "."))
    assert circles == []


def test_no_function_level_import_of_bigtopics_outside_the_lazy_ones():
    hidden = sorted(f"{name} imports {target} inside a function" for name, found in GRAPH.items()
                    if name not in LAZY_ON_PURPOSE for target, at_top in found if not at_top)
    assert hidden == []


@pytest.mark.parametrize("feature", ["bigtopics.infer", "bigtopics.heldout", "bigtopics.evaluate",
                                     "bigtopics.diagnostics"])
def test_features_reach_a_cluster_through_the_cluster_layer_not_the_training_executor(feature):
    reached = _reached(feature)
    assert "bigtopics.cluster" in reached or feature == "bigtopics.diagnostics"
    assert not {name for name in reached if name.startswith("bigtopics.executors") or name == "bigtopics.trainer"}


def test_the_cluster_layer_names_no_feature():
    assert _reached("bigtopics.cluster") <= {"bigtopics.options", "bigtopics.cores", "bigtopics.kernels.pieces"}
