"""Reading profiles: torch.profiler tables as plain rows, Nsight Compute where present, nvidia-smi.

A profiler table (`prof.key_averages()`) mixes four kinds of row, and reading it right starts
with telling them apart:

* "op": a PyTorch operator (`aten::addmm`). Its *self* time is its own work; its *total* time
  also counts every operator it called (`aten::linear` calls `aten::addmm`).
* "kernel": a GPU kernel (`sm90_xmma_gemm_...`, `vectorized_elementwise_kernel`); one row sums every
  launch of that kernel, whichever operator launched it.
* "annotation": a label put around many operators (`ProfilerStep#3`, `record_function("forward")`,
  `Optimizer.step#SGD.step`): its total is the time of what it wraps.
* "runtime": the CUDA runtime on the CPU side (`cudaLaunchKernel`, `cudaDeviceSynchronize`), and the
  profiler's own host-side work.

The kind comes from the event's own record (its device type, and whether `record_function` made it),
never from its name alone: PyTorch's kernels are named like
`void at::native::vectorized_elementwise_kernel<4, ...cos_kernel_cuda(...)::{lambda()#1}...>`.

`rows(prof)` turns a profile into a list of dicts with those kinds, in microseconds: what the
lesson 03 exercises take, and what a learner can print, sort and plot.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROW_KEYS = ("name", "kind", "calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")


def _kind(avg) -> str:
    """The row's kind from what the profiler recorded about the event, not from its name: PyTorch's own
    kernels have '#' in theirs (`...cos_kernel_cuda(...)::{lambda()#1}...`), as annotations may."""
    name = avg.key
    device_type = str(getattr(avg, "device_type", "DeviceType.CPU"))
    annotation = getattr(avg, "is_user_annotation", None)  # record_function ranges, on the CPU and the GPU
    if annotation or name.startswith("ProfilerStep#"):
        return "annotation"
    if not device_type.endswith("CPU"):
        return "kernel"  # kernels, and the memcpy / memset a GPU does
    if name.startswith(("cuda", "cu")) and "::" not in name:
        return "runtime"
    if "::" in name:
        return "op"
    # a CPU row that is neither: a record_function label on a torch without is_user_annotation, else the
    # profiler's own work on the host ("Activity Buffer Request"), which belongs with the runtime
    return "annotation" if annotation is None else "runtime"


def rows(prof_or_averages) -> list[dict]:
    """A profile (or its key_averages()) as plain rows: name, kind, calls and times in µs."""
    averages = prof_or_averages.key_averages() if hasattr(prof_or_averages, "key_averages") else prof_or_averages
    out = []
    for avg in averages:
        out.append({
            "name": avg.key,
            "kind": _kind(avg),
            "calls": int(avg.count),
            "self_cpu_us": float(avg.self_cpu_time_total),
            "cpu_total_us": float(avg.cpu_time_total),
            "self_device_us": float(getattr(avg, "self_device_time_total", 0.0) or 0.0),
            "device_total_us": float(getattr(avg, "device_time_total", 0.0) or 0.0),
        })
    return out


def has_device_times(table: list[dict]) -> bool:
    return any(r["self_device_us"] > 0 for r in table)


def top(table: list[dict], key: str, n: int = 10, kinds=("op",)) -> list[dict]:
    """The `n` rows of these kinds with the largest `key` (e.g. "self_device_us")."""
    chosen = [r for r in table if kinds is None or r["kind"] in kinds]
    return sorted(chosen, key=lambda r: r[key], reverse=True)[:n]


def plot_top(table: list[dict], key: str | None = None, n: int = 10, kinds=("op",), ax=None, title=None):
    """A horizontal bar chart of the `n` largest rows by `key` (self device time if the profile
    has any, else self CPU time). Returns the Axes."""
    import matplotlib.pyplot as plt

    key = key or ("self_device_us" if has_device_times(table) else "self_cpu_us")
    chosen = top(table, key, n, kinds)[::-1]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * len(chosen) + 1))
    labels = [_short(r["name"]) + f"  ×{r['calls']}" for r in chosen]
    ax.barh(labels, [r[key] for r in chosen])
    ax.set_xlabel(key.replace("_us", "").replace("_", " ") + " (µs, summed over calls)")
    ax.set_title(title or f"top {len(chosen)} by {key.replace('_us', '').replace('_', ' ')}")
    return ax


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def step_summary(table: list[dict]) -> dict:
    """Operator calls and time per profile: how many dispatches, how much self time, by side."""
    ops = [r for r in table if r["kind"] == "op"]
    kernels = [r for r in table if r["kind"] == "kernel"]
    return {
        "op_calls": sum(r["calls"] for r in ops),
        "kernel_launches": sum(r["calls"] for r in kernels),
        "op_self_cpu_us": sum(r["self_cpu_us"] for r in ops),
        "kernel_time_us": sum(r["self_device_us"] for r in kernels),
    }


# ---------------------------------------------------------------------------------------------
# Nsight Compute (ncu): present on some GPU machines, absent on most laptops and on CI
# ---------------------------------------------------------------------------------------------

NCU_METRICS = {
    "dram__bytes.sum.per_second": "DRAM bandwidth achieved",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory throughput, % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy, %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput, % of peak",
    "gpu__time_duration.sum": "kernel duration",
}


def ncu_path() -> str | None:
    """Where `ncu` is, or None. Looks on PATH and in the usual CUDA install folders."""
    found = shutil.which("ncu")
    if found:
        return found
    for root in ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute"):
        candidate = os.path.join(root, "ncu")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def ncu_profile(script: str, kernel_regex: str, metrics=tuple(NCU_METRICS), timeout_s: float = 300) -> dict:
    """Run `script` (Python source) under ncu, profile the first kernel whose name matches
    `kernel_regex`, and return {metric: (value, unit)} plus "kernel" (its full name).

    Raises RuntimeError with ncu's own words when it cannot profile (no ncu, no permission to
    read the GPU's counters, no matching kernel)."""
    ncu = ncu_path()
    if ncu is None:
        raise RuntimeError("ncu (Nsight Compute) is not installed on this machine")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "target.py")
        with open(path, "w") as f:
            f.write(script)
        cmd = [ncu, "--csv", "--page", "raw", "--launch-count", "1", "--kernel-name", f"regex:{kernel_regex}",
               "--metrics", ",".join(metrics), sys.executable, path]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    return _parse_ncu_csv(done.stdout, done.stderr)


def _parse_ncu_csv(stdout: str, stderr: str = "") -> dict:
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        words = " | ".join((stderr.strip() or stdout.strip()).splitlines()[-4:])
        raise RuntimeError(f"ncu profiled nothing: {words or 'no output'}")
    reader = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, values = reader[0], reader[1], reader[2]
    out = {"kernel": values[header.index("Kernel Name")] if "Kernel Name" in header else "?"}
    for i, name in enumerate(header):
        if name in NCU_METRICS or "__" in name:
            text = values[i].replace(",", "")
            try:
                out[name] = (float(text), units[i])
            except ValueError:
                out[name] = (text, units[i])
    return out


# ---------------------------------------------------------------------------------------------
# nvidia-smi's "GPU utilisation": the share of time *some* kernel was running, not how hard
# ---------------------------------------------------------------------------------------------


def nvidia_smi_utilization() -> int | None:
    """One reading of nvidia-smi's utilization.gpu (percent) for GPU 0, or None without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    done = subprocess.run([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", "0"],
                          capture_output=True, text=True, timeout=30)
    try:
        return int(done.stdout.strip().splitlines()[0])
    except (ValueError, IndexError):
        return None


def utilization_while(work, seconds: float = 3.0, interval_s: float = 0.25) -> dict:
    """Call `work()` over and over for about `seconds` while sampling nvidia-smi in a thread.

    Returns {"samples": [percent, ...], "calls": how many times work() ran, "seconds": wall time}.
    """
    samples: list[int] = []
    stop = threading.Event()

    def sample():
        time.sleep(min(1.0, seconds / 4))  # let the loop get going (utilization is averaged over ~1 s)
        while not stop.is_set():
            value = nvidia_smi_utilization()
            if value is not None:
                samples.append(value)
            stop.wait(interval_s)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        work()
        calls += 1
    _sync()
    elapsed = time.perf_counter() - start
    stop.set()
    thread.join()
    return {"samples": samples, "calls": calls, "seconds": elapsed}


def _sync():
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()
