"""Re-measure on a GPU every figure that lessons 03 and 10 take from torch.profiler tables, and record the
profile that tests/test_profiling.py classifies.

    OUT=some/dir PYTHONPATH=. python tools/profile_figures.py

Writes to $OUT (default ./profile-figures):
* gpu_profile.json: one small profile (eager cos, a bf16 matmul, a record_function range, three
  profiler steps) as key_averages() rows with the fields `profiling.rows` reads, and the machine;
* profiles_raw.json: the same fields for every profile the lessons' cells tabulate, by cell, so that
  their kernel counts can be recomputed with any classifier;
* the printed output of lesson 03's code cells and of lesson 10's up to its fused step (cells 1-23),
  run in order as plain Python without their `check(...)` lines (the grader is not what is measured).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

import gpuprinciples  # noqa: E402,F401  (first: decides GPU or interpreter)
from gpuprinciples.measure import profiling  # noqa: E402

OUT = os.environ.get("OUT", "profile-figures")
FIELDS = ("count", "self_cpu_time_total", "cpu_time_total", "self_device_time_total", "device_time_total")


def raw(averages) -> list[dict]:
    """key_averages() rows as plain dicts: what `profiling.rows` reads, and nothing it computes."""
    out = []
    for a in averages:
        row = {"key": a.key, "device_type": str(a.device_type),
               "is_user_annotation": getattr(a, "is_user_annotation", None)}
        row.update({f: float(getattr(a, f, 0) or 0) for f in FIELDS})
        out.append(row)
    return out


def machine() -> dict:
    import triton
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "sms": props.multi_processor_count, "l2_cache_size": props.L2_cache_size,
            "total_memory": props.total_memory, "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def record_small_profile() -> dict:
    from torch.profiler import ProfilerActivity, profile, record_function
    x = torch.randn(1 << 20, device="cuda")
    a = torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):  # warm-up: cuBLAS picks its kernel, the caching allocator fills
        x.cos().cos(), a @ a
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            with record_function("forward"):
                x.cos().cos()
                a @ a
            prof.step()
        torch.cuda.synchronize()
    events = [{"name": e.name, "device_type": str(e.device_type),
               "is_user_annotation": getattr(e, "is_user_annotation", None),
               "activity_type": str(getattr(e, "activity_type", None))} for e in prof.events()]
    return {"machine": machine(), "what": "3 steps of record_function('forward'){x.cos().cos(); a @ a}, x 2^20 fp32, "
            "a 512x512 bf16; torch.profiler CPU+CUDA", "rows": raw(prof.key_averages()), "events": events}


RAW: list[dict] = []
CELL = {"label": ""}


def tap_rows():
    """Keep the raw fields of every table the cells make (decoder.profile_kernels calls profiling.rows too)."""
    original = profiling.rows

    def rows(prof_or_averages):
        averages = prof_or_averages.key_averages() if hasattr(prof_or_averages, "key_averages") else prof_or_averages
        RAW.append({"cell": CELL["label"], "rows": raw(averages)})
        return original(prof_or_averages)

    profiling.rows = rows


def run_cells(path: str, last: int | None = None) -> None:
    nb = json.load(open(path))
    scope: dict = {"__name__": "__main__"}
    for i, cell in enumerate(nb["cells"]):
        if last is not None and i > last:
            break
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines() if not line.startswith("check("))
        CELL["label"] = f"{os.path.basename(path)}[{i}]"
        print(f"\n----- {CELL['label']}", flush=True)
        started = time.perf_counter()
        try:
            exec(compile(source, CELL["label"], "exec"), scope)
        except Exception as exc:  # noqa: BLE001 - say it and go on: the other cells' figures still count
            print(f"!!! {CELL['label']}: {type(exc).__name__}: {exc}")
        print(f"----- {CELL['label']}: {time.perf_counter() - started:.1f} s", flush=True)
        save_raw()  # after every cell: a run cut short by its time limit keeps what it measured


def save_raw() -> None:
    with open(os.path.join(OUT, "profiles_raw.json"), "w") as f:
        json.dump(RAW, f)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    if torch.cuda.is_available():
        small = record_small_profile()
        with open(os.path.join(OUT, "gpu_profile.json"), "w") as f:
            json.dump(small, f, indent=1)
        print(json.dumps(small["machine"]))
    tap_rows()
    which = sys.argv[1:] or ["03", "10"]
    try:
        if "03" in which:
            run_cells("solutions/03-profiling.ipynb")
        if "10" in which:
            run_cells("solutions/10-decoding.ipynb", last=23)
    finally:
        save_raw()


if __name__ == "__main__":
    main()
