"""Nothing hidden: sentences from the evidence observe.py gathers in the grading child (pure; grader side).

Every call the grader makes (the warm-up call, the graded call, the timing calls) sends back one
`watched` entry: {"call": words, "watch": observe.Watch's evidence, "torch_ops" / "torch_internal_ops":
the operators the counters' dispatch mode saw (the learner's / Triton's own), "triton": the learner's
Triton launches by kernel name, "benchmark": an autotuner's launches by kernel name}. What the
profiler saw beyond what the counters saw was hidden from them; a thread, a process or a library
reached behind PyTorch's back is work the grader cannot count or time. Each is a failure with a
sentence that says what to do instead.
"""

from __future__ import annotations

from collections import Counter

from ..measure.counters import FREE_OPS

# allocations, views and metadata: no work to hide. detach_: torch.tensor(...) detaches the tensor it builds
# below the Python dispatch key, so the mode never sees what the profiler does
NO_WORK = FREE_OPS | {"detach_", "lift_fresh"}


def _listing(counts: Counter, limit: int = 6) -> str:
    items = counts.most_common()
    text = ", ".join(f"{name}×{n}" for name, n in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def hidden_ops(entry: dict) -> tuple[Counter, Counter]:
    """(operators the profiler saw that the counters did not, those of them on another thread)."""
    watch = entry.get("watch") or {}
    seen = Counter(entry.get("torch_ops") or {}) + Counter(entry.get("torch_internal_ops") or {})
    profiled = Counter({k: v for k, v in (watch.get("ops") or {}).items() if k not in NO_WORK})
    hidden = profiled - seen
    elsewhere = Counter({k: min(v, hidden[k]) for k, v in (watch.get("ops_elsewhere") or {}).items() if hidden[k]})
    return hidden, elsewhere


def unexplained_kernels(entry: dict) -> Counter:
    """GPU kernels that neither a counted Triton launch, an autotuner's benchmark, nor an operator the
    profiler saw launched: a library reached without PyTorch. PyTorch's own ATen kernels (`at::native::`)
    only an operator launches, and operators are judged by `hidden_ops`: on an H200 the fill with which
    Triton's autotuner clears the L2 between its benchmark runs came without a link to its operator, and a
    right autotuned kernel failed for it."""
    watch = entry.get("watch") or {}
    kernels = Counter({k: v for k, v in (watch.get("kernels") or {}).items() if "at::native::" not in k})
    explained = (Counter(watch.get("kernels_under_ops") or {}) + Counter(entry.get("triton") or {})
                 + Counter(entry.get("benchmark") or {}))
    return kernels - explained


def sentences(watched: list[dict], where: str) -> list[str]:
    """At most one sentence per kind of hidden work, over every call of one case."""
    out: dict[str, str] = {}
    for entry in watched or ():
        call = entry.get("call", "call")
        at = f"{call} of {where}"
        watch = entry.get("watch") or {}
        noted = list(watch.get("noted") or ())
        switched_off = watch.get("profiled") and not watch.get("profiler_on", True)
        if switched_off or any(n.startswith("profiler:") for n in noted):
            out.setdefault("profiler", f"switched PyTorch's profiler or its RecordFunction off during the {at}: "
                                       "the grader records every operator there; leave the profiler alone")
        hidden, elsewhere = hidden_ops(entry)
        if hidden:
            how = (f" ({_listing(elsewhere)} on another thread)" if elsewhere else
                   " (under torch._C._DisableTorchDispatch, _disable_current_modes or the like)")
            out.setdefault("ops", f"ran PyTorch operators the grader's op counter did not see on the {at}: "
                                  f"{_listing(hidden)}{how}; hidden work is still work: do it in your kernel")
        kernels = unexplained_kernels(entry)
        if kernels:
            out.setdefault("kernels", f"GPU kernels ran on the {at} that are neither your Triton launches nor a "
                                      f"PyTorch operator's: {_listing(kernels)}; call no library behind PyTorch's "
                                      "back (ctypes): do the work in your Triton kernel")
        threads = [n[len("thread: "):] for n in noted if n.startswith("thread:")]
        alive = list(watch.get("threads_alive") or ())
        if threads or alive:
            what = "; ".join(threads[:2] + [f"still running after it returned: {a}" for a in alive[:2]])
            out.setdefault("threads", f"started a thread on the {at} ({what}): the grader counts and times the "
                                      "calling thread; do all the work in the call, on the calling thread")
        processes = [n[len("process: "):] for n in noted if n.startswith("process:")]
        left = list(watch.get("processes_alive") or ())
        if processes or left:
            what = "; ".join(processes[:2] + [f"still running after it returned: {p}" for p in left[:2]])
            out.setdefault("processes", f"started a process on the {at} ({what}): work in another process is "
                                        "hidden from the grader; do it in your kernel, in the call")
        libraries = [n[len("library: "):] for n in noted if n.startswith("library:")]
        if libraries:
            out.setdefault("libraries", f"{libraries[0]} on the {at}: a library reached behind PyTorch's back is "
                                        "hidden from the grader; do the work in your Triton kernel")
    return list(out.values())


def left_running(watched: list[dict]) -> bool:
    """A thread or process of the learner's still running after a call: the check ends with that case."""
    return any((e.get("watch") or {}).get("threads_alive") or (e.get("watch") or {}).get("processes_alive")
               for e in watched or ())


def import_sentences(left: dict) -> list[str]:
    """What the learner's module left behind when it was imported, in words (empty: nothing)."""
    out = []
    if not left:
        return out
    noted = list(left.get("noted") or ())
    threads = [n for n in noted if n.startswith("thread:")] + list(left.get("threads_alive") or ())
    if threads:
        out.append("your code started a thread when it was loaded: start nothing at import; the grader "
                   "counts and times only the calls it makes")
    if [n for n in noted if n.startswith("process:")] or left.get("processes_alive"):
        out.append("your code started a process when it was loaded: start nothing at import; work in another "
                   "process is hidden from the grader")
    if left.get("modes"):
        out.append(f"your code left a PyTorch mode active when it was loaded ({', '.join(left['modes'][:3])}): "
                   "enter no dispatch or function mode at import")
    if left.get("hooks"):
        out.append(f"your code installed {', '.join(left['hooks'])} when it was loaded: install no global hooks")
    if [n for n in noted if n.startswith("profiler:")]:
        out.append("your code switched PyTorch's RecordFunction off when it was loaded: leave the profiler alone")
    if [n for n in noted if n.startswith("library:")]:
        out.append("your code loaded a library with ctypes when it was loaded: call no library behind "
                   "PyTorch's back")
    return out
