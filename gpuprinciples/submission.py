"""A learner's code, packed as source so a fresh interpreter can run it.

The grader runs learner code in a child process that it *spawns* (a fork cannot use CUDA once
the notebook has initialised it). Functions cannot cross a process boundary by reference, and
Triton needs a kernel's source anyway, so we ship source:

* from a file (`my.py:cos_cos`): the file's text;
* from a notebook: the function's own source plus what it uses from the notebook's globals,
  found by reading names in the source (decorators included): imports become import lines,
  numbers and strings become assignments, other functions and Triton kernels defined in the
  notebook are packed the same way, recursively. IPython keeps every cell's source, so
  `inspect.getsource` works on notebook functions.

Anything else a function uses from the notebook (a tensor, an object) is refused with a sentence:
define it inside the function. That also keeps answers from being smuggled in from the notebook.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path


class SubmissionError(Exception):
    """The learner's code cannot be packed; the message is the sentence shown to the learner."""


@dataclass(frozen=True)
class Submission:
    source: str  # the text of a module
    name: str  # the learner function's name in it
    origin: str  # where it came from, for messages

    @property
    def is_stub(self) -> bool:
        """True when the function only raises NotImplementedError (a lesson's unsolved exercise)."""
        try:
            tree = ast.parse(self.source)
        except SyntaxError:
            return False
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == self.name:
                body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                return (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
                        and "NotImplementedError" in ast.unparse(body[0].exc))
        return False


def from_path(spec: str) -> Submission:
    """`path/to/file.py:function` -> Submission. Raises SubmissionError with a sentence."""
    if ":" not in spec:
        raise SubmissionError(f"expected FILE.py:FUNCTION, got {spec!r}")
    path_text, name = spec.rsplit(":", 1)
    path = Path(path_text)
    if not path.is_file():
        raise SubmissionError(f"no file at {path}")
    source = path.read_text()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise SubmissionError(f"{path} does not parse: {exc.msg} (line {exc.lineno})") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {(a.asname or a.name).split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    if name not in defined:
        raise SubmissionError(f"{path} defines no function called {name!r}")
    return Submission(source=source, name=name, origin=str(path))


def from_function(fn) -> Submission:
    if not callable(fn):
        raise SubmissionError(f"expected a function, got a {type(fn).__name__}")
    fn = inspect.unwrap(fn)
    if not isinstance(fn, types.FunctionType):
        raise SubmissionError(f"expected a plain Python function (def ...), got a {type(fn).__name__}")
    if fn.__name__ == "<lambda>":
        raise SubmissionError("write the answer as a `def` function, not a lambda, so the grader can read its source")
    module = inspect.getmodule(fn)
    module_file = getattr(module, "__file__", None)
    if module is not None and module.__name__ != "__main__" and module_file and module_file.endswith(".py"):
        # defined in a file of its own: ship the whole file
        return Submission(source=Path(module_file).read_text(), name=fn.__name__, origin=module_file)
    if fn.__closure__:
        raise SubmissionError(f"{fn.__name__} is defined inside another function; define it at the top level of a cell")
    packer = _Packer(fn.__globals__)
    packer.add_object(fn.__name__, fn)
    return Submission(source=packer.render(), name=fn.__name__, origin="notebook")


def _triton_python_function(obj):
    """The Python function behind a Triton kernel (jit, autotune, heuristics wrappers), or None."""
    seen = 0
    while hasattr(obj, "fn") and not isinstance(obj, types.FunctionType) and seen < 8:
        obj = obj.fn
        seen += 1
    return obj if isinstance(obj, types.FunctionType) and seen else None


def _is_simple_value(value) -> bool:
    if isinstance(value, (bool, int, float, str, bytes, type(None))):
        return True
    if isinstance(value, (tuple, list, frozenset)) and len(value) <= 64:
        return all(_is_simple_value(v) for v in value)
    return False


class _Packer:
    def __init__(self, namespace: dict):
        self.namespace = namespace
        self.imports: list[str] = []
        self.values: list[str] = []
        self.blocks: list[str] = []
        self.done: set[str] = set()

    def add_object(self, name: str, obj) -> None:
        if name in self.done:
            return
        self.done.add(name)
        python_fn = obj if isinstance(obj, types.FunctionType) else _triton_python_function(obj)
        if isinstance(obj, type) and obj.__module__ == "__main__":
            python_fn = obj
        if python_fn is None:
            raise SubmissionError(f"cannot pack {name!r}")
        try:
            source = textwrap.dedent(inspect.getsource(python_fn))
        except (OSError, TypeError):
            raise SubmissionError(f"the grader cannot read the source of {name!r}; define it in a notebook cell "
                                  "or a .py file") from None
        for used in sorted(_names_used(source)):
            self.add_name(used, by=name)
        self.blocks.append(source)

    def add_name(self, name: str, by: str) -> None:
        if name in self.done or name not in self.namespace:
            return
        value = self.namespace[name]
        if name in vars(builtins) and value is getattr(builtins, name):
            return
        if isinstance(value, types.ModuleType):
            self.done.add(name)
            self.imports.append(f"import {value.__name__} as {name}" if value.__name__ != name
                                else f"import {name}")
            return
        home = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        defined_here = home in (None, "__main__") or (home or "").startswith("__main__")
        if not defined_here and qualname and "." not in qualname and (
                callable(value) or isinstance(value, type)):
            self.done.add(name)
            line = f"from {home} import {qualname}"
            self.imports.append(line if qualname == name else f"{line} as {name}")
            return
        if isinstance(value, types.FunctionType) or _triton_python_function(value) is not None or (
                isinstance(value, type) and defined_here):
            self.add_object(name, value)
            return
        constexpr_value = getattr(value, "value", None) if type(value).__name__ == "constexpr" else None
        if constexpr_value is not None and _is_simple_value(constexpr_value):
            self.done.add(name)
            self.imports.append("import triton.language")
            self.values.append(f"{name} = triton.language.constexpr({constexpr_value!r})")
            return
        if _is_simple_value(value):
            self.done.add(name)
            self.values.append(f"{name} = {value!r}")
            return
        if type(value).__name__ == "dtype" and type(value).__module__ == "torch":
            self.done.add(name)
            self.imports.append("import torch")
            self.values.append(f"{name} = {value}")
            return
        raise SubmissionError(
            f"{by} uses the notebook variable {name!r} (a {type(value).__name__}), which the grader does not "
            f"copy into its clean process: compute it inside the function, or pass it as a constant")

    def render(self) -> str:
        imports = list(dict.fromkeys(self.imports))
        parts = ["# packed by gpuprinciples from a notebook", *imports, *self.values, "", *self.blocks]
        return "\n".join(parts) + "\n"


def _names_used(source: str) -> set[str]:
    """The names a piece of source reads from its module (decorators and defaults included).

    A name that the source binds itself (a parameter, an assignment, a loop or comprehension
    variable, an import inside the function) is its own, not the notebook's: `def f(x)` must not
    pick up a notebook tensor called `x`. Names declared `global` are looked up all the same.
    """
    tree = ast.parse(source)
    loaded: set[str] = set()
    bound: set[str] = set()
    declared_global: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not tree.body[0]:
            bound.add(node.name)
    return (loaded - bound) | (loaded & declared_global)
