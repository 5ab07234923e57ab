"""Packing a learner's code as source: from a file, from a namespace, and from a real notebook."""

import textwrap

import nbformat
import pytest
from nbclient import NotebookClient

from gpuprinciples.sandbox.submission import SubmissionError, from_function, from_path


def define(source: str, name: str):
    """Define functions the way a notebook does: in a __main__-like namespace with registered source."""
    import linecache
    filename = f"<cell-{abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def run_packed(submission, *args):
    namespace = {"__name__": "packed"}
    exec(compile(submission.source, "<packed>", "exec"), namespace)
    return namespace[submission.name](*args)


def test_globals_are_packed_by_kind():
    fn = define(textwrap.dedent('''
        import math
        from math import sqrt as root
        SCALE = 3
        NAMES = ("a", "b")

        def helper(v):
            return v * SCALE

        def answer(v):
            return helper(root(v)) + math.floor(0.5) + len(NAMES)
    '''), "answer")
    sub = from_function(fn)
    assert "import math" in sub.source and "from math import sqrt as root" in sub.source
    assert "SCALE = 3" in sub.source and "def helper" in sub.source
    assert run_packed(sub, 16.0) == 14.0


def test_a_global_tensor_is_refused_with_a_sentence():
    import torch
    fn = define("import torch\nANSWER = None\ndef cheat(x):\n    return ANSWER\n", "cheat")
    fn.__globals__["ANSWER"] = torch.zeros(3)
    with pytest.raises(SubmissionError, match="notebook variable 'ANSWER'"):
        from_function(fn)


def test_stub_detection():
    fn = define('def f(x):\n    """doc"""\n    raise NotImplementedError("Exercise: write your solution here")\n', "f")
    assert from_function(fn).is_stub
    fn = define('def f(x):\n    if x:\n        raise NotImplementedError\n    return x\n', "f")
    assert not from_function(fn).is_stub


def test_from_path_errors_are_sentences(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    with pytest.raises(SubmissionError, match="does not parse"):
        from_path(f"{bad}:f")
    with pytest.raises(SubmissionError, match="FILE.py:FUNCTION"):
        from_path(str(bad))


NOTEBOOK_CELLS = [
    "import gpuprinciples\nimport torch\nimport triton\nimport triton.language as tl\nfrom gpuprinciples import check",
    "BLOCK = 256\n\n@triton.jit\ndef kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
    "    tl.store(y_ptr + offs, tl.cos(tl.cos(tl.load(x_ptr + offs, mask=mask).to(tl.float32))), mask=mask)",
    "def grid(n):\n    return (triton.cdiv(n, BLOCK),)\n\n"
    "def cos_cos(x):\n    y = torch.empty_like(x)\n"
    "    kernel[grid(x.numel())](x, y, x.numel(), BLOCK=BLOCK)\n    return y",
    "report = check('fusion.cos_cos', cos_cos)\nassert report.passed, report.reasons\n"
    "assert report.measurements['launches'] == 1 or report.mode == 'gpu'",
    "def stub(x):\n    raise NotImplementedError('Exercise: write your solution here')\n"
    "r = check('fusion.cos_cos', stub)\nassert r.status == 'not attempted'\nr",
]


def test_a_kernel_defined_in_a_real_notebook_is_graded(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in NOTEBOOK_CELLS])
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    html = [o for o in nb.cells[3].outputs if "text/html" in o.get("data", {})]
    assert html and "PASSED" in html[0]["data"]["text/html"]  # the report was shown once, as HTML
    shown = [o for o in nb.cells[4].outputs if "text/html" in o.get("data", {})]
    assert len(shown) == 1 and "NOT ATTEMPTED" in shown[0]["data"]["text/html"]  # once, not twice


def test_parameters_and_locals_are_not_looked_up_in_the_notebook():
    import torch
    fn = define("def f(x, b):\n    y = x + b\n    return [t * 2 for t in (y,)][0]\n", "f")
    fn.__globals__.update(x=torch.zeros(2), y=torch.zeros(2), t=torch.zeros(2), b=torch.zeros(2))
    sub = from_function(fn)  # would refuse the global tensors if it looked them up
    assert run_packed(sub, 1, 2) == 6
