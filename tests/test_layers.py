"""The package's folders are its layers: each imports only from the layers below it, sandbox/ from nothing
else of the package, and no modules import each other in a circle. Read from the code's own imports (every
`import`, at module level or inside a function), without importing anything."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpuprinciples"

# bottom to top; a module not in a layer folder (cli.py, __init__.py) is "top"
LAYERS = ("machine", "toolchain", "sandbox", "measure", "course", "grader", "instructor", "top")
ALONE = {"sandbox"}  # layers that may import nothing of the package outside their own folder


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = ["gpuprinciples", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else "top"


def imports_of(path: Path, modules: set[str], root: Path = PACKAGE) -> list[tuple[str, int]]:
    """(imported module, line) for every import of this package in the file; `from a import b` counts as
    an import of a.b where b is a module, of a otherwise."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "gpuprinciples"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "gpuprinciples":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.append((sub if sub in modules else source, node.lineno))
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, list[tuple[str, int, str]]]:
    """module -> [(imported module, line, file)] within the package."""
    paths = sorted(root.rglob("*.py"))
    modules = {module_name(p, root) for p in paths}
    graph = {}
    for p in paths:
        where = str(p.relative_to(root.parent))
        graph[module_name(p, root)] = [(m, line, where) for m, line in imports_of(p, modules, root) if m in modules]
    return graph


def upward_imports(graph) -> list[str]:
    """A sentence for every import from a higher layer, or out of a layer that must import nothing else."""
    sentences = []
    for module, edges in graph.items():
        mine = layer_of(module)
        for target, line, path in edges:
            theirs = layer_of(target)
            if theirs == mine:
                continue
            if mine in ALONE:
                sentences.append(f"{path}:{line} imports {target}: {mine}/ imports nothing of the package outside "
                                 f"{mine}/ (pass what it needs in as an argument)")
            elif LAYERS.index(theirs) > LAYERS.index(mine):
                sentences.append(f"{path}:{line} imports {target}: {mine}/ may import only from the layers below it "
                                 f"({', '.join(LAYERS[:LAYERS.index(mine)]) or 'none'}), and {theirs}/ is above it")
    return sentences


def circles(graph) -> list[str]:
    """A sentence for every group of modules that import each other in a loop (Tarjan's strongly connected parts)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _, _ in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or any(t == v for t, _, _ in graph.get(v, ())):
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    sentences = []
    for group in groups:
        ties = [f"{path}:{line} imports {t}" for m in group for t, line, path in graph[m] if t in group]
        sentences.append(f"{', '.join(group)} import each other in a circle ({'; '.join(ties)})")
    return sentences


def floors(graph) -> int:
    """The longest chain of imports, counted in modules (a module that imports nothing stands on floor 1)."""
    memo = {}

    def floor(v):
        if v not in memo:
            memo[v] = 0  # no circles here (test_no_circles), so a revisit cannot recurse forever
            memo[v] = 1 + max((floor(t) for t, _, _ in graph.get(v, ()) if t != v), default=0)
        return memo[v]
    return max((floor(v) for v in graph), default=0)


def test_every_import_points_down():
    found = upward_imports(import_graph())
    assert not found, "\n".join(found)


def test_no_circles():
    found = circles(import_graph())
    assert not found, "\n".join(found)


def test_every_module_stands_in_a_layer():
    graph = import_graph()
    tops = sorted(m for m in graph if layer_of(m) == "top")
    assert tops == ["gpuprinciples", "gpuprinciples.cli"], tops


def test_the_checks_can_fail():
    fake = {
        "gpuprinciples.machine.specs": [("gpuprinciples.grader.judge", 7, "gpuprinciples/machine/specs.py")],
        "gpuprinciples.grader.judge": [("gpuprinciples.grader.report", 3, "gpuprinciples/grader/judge.py")],
        "gpuprinciples.grader.report": [("gpuprinciples.grader.judge", 5, "gpuprinciples/grader/report.py")],
        "gpuprinciples.sandbox.child": [("gpuprinciples.machine.runtime", 9, "gpuprinciples/sandbox/child.py")],
        "gpuprinciples.course.hints": [("gpuprinciples.measure.counters", 4, "gpuprinciples/course/hints.py")],
    }
    up = upward_imports(fake)
    assert up == [
        "gpuprinciples/machine/specs.py:7 imports gpuprinciples.grader.judge: machine/ may import only from the "
        "layers below it (none), and grader/ is above it",
        "gpuprinciples/sandbox/child.py:9 imports gpuprinciples.machine.runtime: sandbox/ imports nothing of the "
        "package outside sandbox/ (pass what it needs in as an argument)",
    ]
    assert circles(fake) == [
        "gpuprinciples.grader.judge, gpuprinciples.grader.report import each other in a circle "
        "(gpuprinciples/grader/judge.py:3 imports gpuprinciples.grader.report; "
        "gpuprinciples/grader/report.py:5 imports gpuprinciples.grader.judge)"]


def test_function_level_imports_count(tmp_path):
    (tmp_path / "gpuprinciples" / "machine").mkdir(parents=True)
    (tmp_path / "gpuprinciples" / "grader").mkdir()
    for name in ("__init__.py", "machine/__init__.py", "grader/__init__.py", "grader/judge.py"):
        (tmp_path / "gpuprinciples" / name).write_text("")
    (tmp_path / "gpuprinciples" / "machine" / "specs.py").write_text(
        "def late():\n    from ..grader import judge\n    return judge\n")
    graph = import_graph(tmp_path / "gpuprinciples")
    assert graph["gpuprinciples.machine.specs"] == [("gpuprinciples.grader.judge", 2, "gpuprinciples/machine/specs.py")]
    assert len(upward_imports(graph)) == 1


def private_imports(source: str) -> list[str]:
    """Every `_name` a piece of notebook code imports from the package (lessons use public names only, so the
    package may rename its insides without breaking a learner's notebook)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpuprinciples"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name.startswith("gpuprinciples") and any(p.startswith("_") for p in a.name.split("."))]
    return sorted(found)


def notebook_code(path: Path) -> str:
    import json
    cells = json.loads(path.read_text())["cells"]
    # IPython magics (%, !) are not Python; they import nothing of the package
    return "\n".join(line for c in cells if c["cell_type"] == "code"
                     for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))


def test_notebooks_import_only_public_names():
    root = PACKAGE.parent
    found = [f"{p.relative_to(root)} imports {name}" for folder in ("solutions", "lessons")
             for p in sorted((root / folder).glob("*.ipynb")) for name in private_imports(notebook_code(p))]
    assert not found, "\n".join(found)


def test_private_imports_are_seen():
    assert private_imports("if x:\n    from gpuprinciples.course.exercises.decoding import _a, b\n"
                           "import gpuprinciples._inner\nfrom torch import _C\n") == [
        "gpuprinciples._inner", "gpuprinciples.course.exercises.decoding._a"]
