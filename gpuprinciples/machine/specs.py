"""GPU spec sheets: what a datasheet says a chip could reach, and what this machine is called.

A datasheet gives the *peak* a chip could reach; `measure.ceilings` gives what this machine
really reaches for the two things every lesson leans on: moving bytes (a large device-to-device
copy) and multiplying matrices. Lessons compare a kernel with the measured ceilings, and use the
datasheets only to project onto GPUs that are not here.

Datasheet figures below are DENSE. NVIDIA's headline tensor-core numbers for these parts assume
2:4 structured sparsity and are twice the dense rate; we keep that headline in
`sparse_bf16_tflops` only so the trap is written down next to the real figure.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GPUSpec:
    name: str
    dense_bf16_tflops: float  # tensor cores, bf16 and fp16 alike on these parts, no sparsity
    dense_tf32_tflops: float  # tensor cores, fp32 inputs rounded to tf32, no sparsity
    fp32_tflops: float  # CUDA cores, no tensor cores
    bandwidth_tbs: float  # memory bandwidth, TB/s (10^12 bytes/s)
    memory_gb: float  # as the datasheet states it
    # L2 cache, MiB, where NVIDIA publishes it for the part (see SPECS); l2_bytes() prefers the GPU's own
    l2_mib: float | None
    sms: int | None
    source: str
    sparse_bf16_tflops: float | None = None  # the datasheet's headline, with 2:4 sparsity: NOT a peak to use

    def flops(self, dtype="bf16") -> float:
        """Peak FLOP/s for matmuls in `dtype` ("bf16", "fp16", "tf32", "fp32" or a torch dtype)."""
        key = dtype_key(dtype)
        tflops = {"bf16": self.dense_bf16_tflops, "fp16": self.dense_bf16_tflops,
                  "tf32": self.dense_tf32_tflops, "fp32": self.fp32_tflops}[key]
        return tflops * 1e12

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.bandwidth_tbs * 1e12

    def ridge_point(self, dtype="bf16") -> float:
        """FLOPs per byte a kernel needs before compute, not memory, limits it."""
        return self.flops(dtype) / self.bandwidth


def dtype_key(dtype) -> str:
    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    key = names.get(dtype, dtype)
    if key not in ("bf16", "fp16", "tf32", "fp32"):
        raise ValueError(f"no peak for dtype {dtype!r}: use 'bf16', 'fp16', 'tf32' or 'fp32'")
    return key


_A100_SHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
               "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")

SPECS: dict[str, GPUSpec] = {
    # L2 sizes: NVIDIA's architecture whitepapers (A100: 40 MB; H100 SXM5: 50 MB; L4, Ada: 48 MB). The H200's
    # datasheet gives none, and its GPU reports more than the H100's 50: L2_cache_size = 62,914,560 bytes (60 MiB)
    # on the course's H200 (torch 2.11, 2026-12-03 and 2026-12-04, tools/profile_figures.py). None here: no
    # published figure; l2_bytes() reads the GPU's own, which is what lesson 11 uses.
    # A100 datasheet: BF16 312 TFLOPS (624 with sparsity), TF32 156 (312), FP32 19.5; 80GB SXM 2,039 GB/s.
    "A100": GPUSpec("A100 SXM4 80GB", 312, 156, 19.5, 2.039, 80, 40, 108, _A100_SHEET, 624),
    # H100 SXM: BF16 1,979 and TF32 989 TFLOPS *with sparsity* (dense: half), FP32 67; 3.35 TB/s.
    "H100": GPUSpec("H100 SXM5 80GB", 989.4, 494.7, 67, 3.35, 80, 50, 132,
                    "https://www.nvidia.com/en-us/data-center/h100/", 1979),
    # H200 SXM: the H100's compute with 141 GB of HBM3e at 4.8 TB/s.
    "H200": GPUSpec("H200 SXM 141GB", 989.4, 494.7, 67, 4.8, 141, None, 132,
                    "https://www.nvidia.com/en-us/data-center/h200/", 1979),
    # L4: BF16 242 and TF32 120 TFLOPS with sparsity, FP32 30.3; 24 GB GDDR6 at 300 GB/s.
    "L4": GPUSpec("L4 24GB", 121, 60, 30.3, 0.3, 24, 48, 58,
                  "https://www.nvidia.com/en-us/data-center/l4/", 242),
    # HGX B200, per GPU: FP16/BF16 4.5 PFLOPS and TF32 2.2 PFLOPS with sparsity, FP32 75 TFLOPS;
    # 180 GB HBM3e at 7.7 TB/s. L2 size and SM count are not on the datasheet.
    "B200": GPUSpec("B200 (HGX) 180GB", 2250, 1100, 75, 7.7, 180, None, None,
                    "https://www.nvidia.com/en-us/data-center/hgx/", 4500),
}

# (short name, pattern the torch.cuda.get_device_name() string must match, pattern it must not).
# PCIe and NVL boards run at lower clocks and power than the SXM sheets above, so they get no match.
_NAME_PATTERNS = (
    ("A100", r"\bA100\b.*\bSXM4?\b.*\b80\s?GB\b", r"PCIe"),
    ("H100", r"\bH100\b", r"PCIe|\bNVL\b"),
    ("H200", r"\bH200\b", r"PCIe|\bNVL\b"),
    ("L4", r"\bL4\b", r"^$"),
    ("B200", r"\bB200\b", r"^$"),
)


def spec_for_device_name(torch_name: str) -> GPUSpec | None:
    """The datasheet for a name like "NVIDIA H100 80GB HBM3", or None when we have none for it."""
    for key, want, avoid in _NAME_PATTERNS:
        if re.search(want, torch_name, re.I) and not re.search(avoid, torch_name, re.I):
            return SPECS[key]
    return None


def l2_bytes(device=None) -> int | None:
    """The L2 cache's size in bytes: the GPU's own report where there is a GPU, else None.

    A spec table's figure is a published one for a part; the running GPU is the one being measured (an H200
    reports 60 MiB where no datasheet states any)."""
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(device if device is not None else 0).L2_cache_size)


def cpu_name() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"CPU {model}, {torch.get_num_threads()} threads"
