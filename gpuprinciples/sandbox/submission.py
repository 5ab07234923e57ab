"""A learner's code, packed so that a fresh interpreter can load it.

The grader runs learner code in a child process that it *spawns* (a fork cannot use CUDA once
the notebook has initialised it), so a function crosses the process boundary in one of two ways:

* by reference, when it lives in an importable module (`from mykernels import attention`, or a
  file inside a package given as `pkg/mod.py:fn`): the child imports the module by its name, with
  the notebook's `sys.path`, so its relative imports work as they do for the learner;
* by source otherwise: a loose file (`my.py:cos_cos`) is shipped as its text, its folder first on
  the child's path; a notebook function as its own source plus what it uses from the notebook's
  globals, found by reading names in the source (decorators included): imports become import
  lines, numbers and strings become assignments, other functions and Triton kernels defined in
  the notebook are packed the same way, recursively. IPython keeps every cell's source, so
  `inspect.getsource` works on notebook functions.

Anything else a function uses from the notebook (a tensor, an object) is refused with a sentence:
define it inside the function. That also keeps answers from being smuggled in from the notebook.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import os
import sys
import textwrap
import threading
import types
from dataclasses import dataclass
from pathlib import Path

# CPython 3.11 keeps one recursion counter per interpreter while it builds AST objects, which threads parsing
# at once can corrupt ("SystemError: AST constructor recursion depth mismatch"; python/cpython#106905 and
# reports like it; CI met it grading fixtures two at a time): the grader's parses take turns
_PARSE_LOCK = threading.Lock()


def _parse(source: str, **options) -> ast.AST:
    with _PARSE_LOCK:
        return ast.parse(source, **options)


class SubmissionError(Exception):
    """The learner's code cannot be packed; the message is the sentence shown to the learner."""


@dataclass(frozen=True)
class Submission:
    source: str  # the text of a module (for a module shipped by reference: its file's text)
    name: str  # the learner function's name in it
    origin: str  # where it came from, for messages
    module: str | None = None  # shipped by reference: the child imports this module by name
    sys_path: tuple[str, ...] = ()  # put first on the child's sys.path

    def job(self, exercise: str, device: str):
        """What the child is sent (channel.Job): the module's name, or its source."""
        from .channel import Job
        return Job(exercise=exercise, name=self.name, device=device, module=self.module,
                   source=None if self.module else self.source, sys_path=list(self.sys_path))

    @property
    def is_stub(self) -> bool:
        """True when the function only raises NotImplementedError (a lesson's unsolved exercise)."""
        try:
            tree = _parse(self.source)
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
        tree = _parse(source, filename=str(path))
    except SyntaxError as exc:
        raise SubmissionError(f"{path} does not parse: {exc.msg} (line {exc.lineno})") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {(a.asname or a.name).split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    if name not in defined:
        raise SubmissionError(f"{path} defines no function called {name!r}")
    not_function = _bound_to_a_value(tree, name)
    if not_function:
        raise SubmissionError(f"{name!r} in {path} is {not_function}, not a plain function: give the name of "
                              "the function to grade")
    package_root, module = _module_name(path.resolve())
    if module is not None:  # a file inside a package: imported as package.module, relative imports and all
        return Submission(source=source, name=name, origin=str(path), module=module, sys_path=(package_root,))
    return Submission(source=source, name=name, origin=str(path), sys_path=(str(path.resolve().parent),))


VALUE_ANSWER_HOWTO = ("a value exercise is answered with a value, not a function: on the command line write it "
                      "(`gpuprinciples grade EXERCISE 0.083`) or name a literal assigned in a file "
                      "(`answer.py:NAME` where answer.py has `NAME = 0.083`); in a notebook, "
                      "`check(EXERCISE, value)`")


def _literal(node):
    """A literal, or arithmetic on numbers (`1 / 12`, `2 * 3 + 4`): evaluated without running any code."""
    import operator
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        left, right = _literal(node.left), _literal(node.right)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
            raise ValueError("arithmetic on numbers only")
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return ops[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    return ast.literal_eval(node)


def value_from_spec(spec: str):
    """A value exercise's answer from the command line: a Python literal (`0.083`, `1/12`, `'memory'`, `{1, 4}`),
    or `FILE.py:NAME` where the file assigns NAME such a literal. Nothing of the file runs. Raises SubmissionError."""
    try:
        return _literal(_parse(spec.strip(), mode="eval").body)
    except (ValueError, SyntaxError, TypeError, ZeroDivisionError):
        pass
    if ":" not in spec or not spec.rsplit(":", 1)[0].endswith(".py"):
        raise SubmissionError(f"{spec!r} is neither a value nor FILE.py:NAME: {VALUE_ANSWER_HOWTO}")
    path_text, name = spec.rsplit(":", 1)
    path = Path(path_text)
    if not path.is_file():
        raise SubmissionError(f"no file at {path}")
    try:
        tree = _parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        raise SubmissionError(f"{path} does not parse: {exc.msg} (line {exc.lineno})") from None
    found = None
    for node in tree.body:  # the last top-level binding wins, as it would when the file runs
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found = node
    if found is None:
        raise SubmissionError(f"{path} assigns nothing to {name!r}")
    try:
        return _literal(found)
    except (ValueError, TypeError, ZeroDivisionError):
        raise SubmissionError(f"{name!r} in {path} is not a literal value (line {found.lineno}): "
                              f"{VALUE_ANSWER_HOWTO}") from None


def _bound_to_a_value(tree: ast.Module, name: str) -> str | None:
    """What `name` is bound to at the top level when that is plainly no function ("an int", "a list",
    "an async function"); None when it may be one (a def, an import, a call, another name). The last
    binding wins, as it does when the module runs."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef) and node.name == name:
            found = "an async function"
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            found = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and name in {
                (a.asname or a.name).split(".")[0] for a in node.names}:
            found = None
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                kind = type(ast.literal_eval(node.value)).__name__
                found = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
            except ValueError:  # not a literal: it may well be a function
                found = None
    return found


def _module_name(path) -> tuple[str, str | None]:
    """(the folder to put on sys.path, the dotted module name) for a file inside a package; (folder, None)
    for a loose file."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return str(folder), (".".join(parts) if len(parts) > 1 else None)


def _child_sys_path() -> tuple[str, ...]:
    """This process's sys.path as absolute folders ('' is the working directory)."""
    return tuple(os.path.abspath(p or os.getcwd()) for p in sys.path if isinstance(p, str) and os.path.isdir(p or "."))


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
        source = Path(module_file).read_text()
        if _importable(module, fn):  # the child imports it by name, as the notebook did
            return Submission(source=source, name=fn.__name__, origin=module_file, module=module.__name__,
                              sys_path=_child_sys_path())
        # loaded some other way (from a path, under another name): ship the whole file
        return Submission(source=source, name=fn.__name__, origin=module_file,
                          sys_path=(str(Path(module_file).resolve().parent),))
    if fn.__closure__:
        raise SubmissionError(f"{fn.__name__} is defined inside another function; define it at the top level of a cell")
    packer = _Packer(fn.__globals__)
    packer.add_object(fn.__name__, fn)
    return Submission(source=packer.render(), name=fn.__name__, origin="notebook")


def _importable(module, fn) -> bool:
    """True when importing `module.__name__` gives this module back, and its attribute is this function."""
    if sys.modules.get(module.__name__) is not module:
        return False
    try:
        found = getattr(importlib.import_module(module.__name__), fn.__name__, None)
    except Exception:  # noqa: BLE001
        return False
    return found is not None and inspect.unwrap(found) is fn


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
    tree = _parse(source)
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
