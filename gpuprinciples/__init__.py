"""gpuprinciples: deep-learning performance from first principles, graded on any machine.

Importing the package first decides the mode (machine/runtime.py): with no GPU it turns on Triton's
interpreter before any kernel is defined, so import it before writing @triton.jit kernels.

The package is built in layers, each a folder that imports only from the layers below it
(tests/test_layers.py checks it):

    machine/     what this machine is, without measuring: runtime (GPU or interpreter), specs, occupancy
    toolchain/   Triton made to behave alike: compat (every version shim), compiling (compile steps without a
                 driver), gpucompile (the sm_90 compile), interpreter (the Hopper emulation), selftest
    sandbox/     running code we do not trust: processes, forkserver (+ zygote), child, ranks, channel,
                 submission; imports nothing else of the package
    measure/     counters, timing, calibrate (the ceilings measured here), collectives, profiling, observe
    course/      kit/ (the words an exercise is declared in), catalog, hints, kernels/, lab/, exercises/
    grader/      grading, compilepass, judge, honesty, worker (the child's side), report, display
    instructor/  gradebook, intake, notebooks (release), bench, figures, verdicts
    cli.py and this file: the command line; `check`, `hint` and the names lessons use

Lessons reach the modules they use by their short names, `from gpuprinciples import check, runtime,
counters, timing` (below: loaded on first use, so importing the package stays cheap).
"""

import importlib as _importlib

from .machine import runtime  # noqa: F401  first: sets TRITON_INTERPRET before any kernel exists
from .toolchain import interpreter as _interpreter

_interpreter.install()  # every Triton shim, once, before any kernel is defined

from .measure import counters  # noqa: E402,F401  (installs its launch hook before any kernel runs)

__version__ = "0.1.0"

# the modules lessons use, by their short names: `gpuprinciples.<name>` -> its home
_PUBLIC = {
    "runtime": "machine.runtime", "specs": "machine.specs", "occupancy": "machine.occupancy",
    "gpucompile": "toolchain.gpucompile",
    "counters": "measure.counters", "timing": "measure.timing", "calibrate": "measure.calibrate",
    "profiling": "measure.profiling",
    "roofline": "course.lab.roofline", "widgets": "course.lab.widgets", "drawing": "course.lab.drawing",
    "decoder": "course.lab.decoder", "models": "course.lab.models", "distributed": "course.lab.distributed",
}


def __getattr__(name):
    if name in _PUBLIC:
        module = _importlib.import_module(f"{__name__}.{_PUBLIC[name]}")
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


def _warm_the_sandbox() -> None:
    """In a notebook, start the grader's warm sandbox now: the first check then waits for no import."""
    import sys
    if "ipykernel" in sys.modules:
        from .sandbox.forkserver import ForkServer
        ForkServer.warm_up_in_background()


_warm_the_sandbox()


def check(exercise_id, answer, **options):
    """Grade `answer` (a function or a value) against exercise `exercise_id`; show and return a Report."""
    from .grader.grading import check as _check
    return _check(exercise_id, answer, **options)


def hint(exercise_id):
    """Show the next hint for an exercise."""
    from .course.hints import hint as _hint
    return _hint(exercise_id)
