"""What each "if you have not done X yet" branch of a lesson prints on a CPU with the exercise unsolved.

CI runs every notebook of lessons/ (the exercises unsolved) under nbval; the repository's conftest.py
checks, as each of these cells runs on a CPU, that its output holds the words below. tests/test_lessons_fresh.py
checks statically that every such branch in lessons/ is listed here, and that the function its words
name is an exercise stub above it. A cell is found by a line of its source (`marker`), not by its number.
"""

from __future__ import annotations

import re

NOT_WRITTEN = "is not written yet: do the exercise above, then run this cell again"
NO_GPU = "No GPU here: nothing is timed."

# (lesson, marker: a line of the cell's source, the words it shows on a CPU unsolved, or None with the reason
# it shows none)
BRANCHES: list[tuple[str, str, str | None]] = [
    ("02-three-bounds", "last = knee(batches, mlp_times)", "write knee() above, then run this cell again"),
    ("02-three-bounds", "mlp_tail(xs, ws, bs)", "write mlp_tail() above, then run this cell again"),
    ("03-profiling", "top_before = describe_bottleneck(step_table)",
     "write bottleneck() above, then run this cell again"),
    ("03-profiling", 'check("profiling.tensor_cores", tensor_core_kernels)', "not attempted yet"),
    ("03-profiling", "prof_after = profile_step(sgd_momentum)", "write sgd_momentum() above, then run this cell again"),
    ("04-mixed-precision", "if not from_function(amp_step).is_stub:", f"amp_step {NOT_WRITTEN}"),
    ("05-activation-checkpointing", 'show("your fit_budget"', "write fit_budget() above, then run this cell again"),
    ("07-triton-fusion", "if written(vector_add):", f"vector_add {NOT_WRITTEN}"),
    ("07-triton-fusion", "if written(cos_cos):", f"cos_cos {NOT_WRITTEN}"),
    ("07-triton-fusion", "def bandwidth_table(fns, args, min_bytes):", "No GPU here: nothing is timed."),
    ("07-triton-fusion", "if runtime.INTERPRETER and written(cos_cos):", f"cos_cos {NOT_WRITTEN}"),
    ("07-triton-fusion", "if written(softmax):", f"softmax {NOT_WRITTEN}"),
    ("07-triton-fusion", "if runtime.HAS_CUDA and written(softmax):", NO_GPU),
    ("07-triton-fusion", "if runtime.HAS_CUDA and written(layernorm):", NO_GPU),
    ("07-triton-fusion", "No GPU here: autotuning measures time on a GPU", "No GPU here: autotuning measures time"),
    ("08-flash-attention", "if written(merge):", f"merge {NOT_WRITTEN}"),
    ("08-flash-attention", "Bytes are counted under the interpreter only", f"attention {NOT_WRITTEN}"),
    ("08-flash-attention", "def key_rows_read(rec, k, n_programs, n):", f"attention {NOT_WRITTEN}"),
    ("08-flash-attention", "causal, tiles of 16: rows of K loaded", f"attention {NOT_WRITTEN}"),
    ("08-flash-attention", "if runtime.HAS_CUDA and written(attention):", NO_GPU),
    ("09-distributed", "%%writefile {WORK}/comm_demo.py", None),  # a script: unsolved, it times the library alone
    ("09-distributed", "%%writefile {WORK}/ddp_demo.py", None),  # a script: unsolved, DDP is compared with nothing
    ("09-distributed", "parts = zero_memory(7_500_000_000, 64, stage)", "write zero_memory above to see the table"),
    ("10-decoding", "if written(kv_cache_bytes):", f"kv_cache_bytes {NOT_WRITTEN}"),
    ("10-decoding", "if runtime.INTERPRETER and written(decode_attention):", f"decode_attention {NOT_WRITTEN}"),
    ("10-decoding", "if runtime.HAS_CUDA and written(decode_attention):", NO_GPU),
    ("10-decoding", "if runtime.HAS_CUDA and written(paged_decode_attention):", NO_GPU),
    # unsolved, the table is drawn with the package's occupancy function: the same words either way
    ("11-memory-hierarchy", "mine = occupancy_warps if written(occupancy_warps) else occupancy.resident_warps",
     "warps/SM"),
    ("11-memory-hierarchy", 'def padded(rows, cols, row, device="cuda"):', f"matmul {NOT_WRITTEN}"),
    ("12-flash-attention-backward", "if written(attention_backward) and written(attention_lse):",
     f"attention_backward {NOT_WRITTEN}"),
    ("12-flash-attention-backward", "if written(flash_forward) and written(flash_backward):",
     f"flash_forward {NOT_WRITTEN}"),
    ("12-flash-attention-backward", "if runtime.HAS_CUDA and written(attention_backward):", NO_GPU),
]

# a code cell with one of these holds a branch on whether an exercise is done
BRANCH = re.compile(r"\bwritten\(|\.is_stub\b|except NotImplementedError")


def is_branch(source: str) -> bool:
    return bool(BRANCH.search(source)) and "def written(" not in source


def expected(lesson: str, source: str) -> tuple[str, str | None] | None:
    """(marker, words) of the listed branch this cell is, or None."""
    found = [(marker, words) for name, marker, words in BRANCHES if name == lesson and marker in source]
    return found[0] if len(found) == 1 else None


def output_text(outputs) -> str:
    """Everything a cell showed: streams, and the plain text and HTML of displays and results."""
    parts = []
    for out in outputs or ():
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
        else:
            data = out.get("data", {})
            parts += [data.get("text/plain", ""), data.get("text/html", "")]
    return "\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


def problem(lesson: str, source: str, outputs) -> str | None:
    """Why this lesson cell's output on a CPU, exercise unsolved, is not what its branch must say; None if fine."""
    listed = expected(lesson, source)
    if listed is None or listed[1] is None:
        return None
    shown = output_text(outputs)
    if listed[1] not in shown:
        return (f"lessons/{lesson}.ipynb, the cell with {listed[0]!r}: unsolved on a CPU it must say "
                f"{listed[1]!r}; it showed: {shown[-600:]!r}")
    return None
