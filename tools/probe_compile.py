"""How long a cold torch.compile of cos(cos(x)) takes in a fresh process (empty Inductor and Triton caches), and
what the grader's child can save of it: the reason for sandbox.child_environment's TORCHINDUCTOR_COMPILE_THREADS=1
and the fork server's import of Inductor (worker.preload). Needs a CUDA GPU.

    for v in default threads1 preimport both; do python tools/probe_compile.py $v; done

default: as PyTorch comes; threads1: TORCHINDUCTOR_COMPILE_THREADS=1 (no pool of compile workers);
preimport: Inductor imported first (as the fork server does, outside the check's time); both: the two."""
import os
import sys
import tempfile
import time

variant = sys.argv[1]
d = tempfile.mkdtemp()
os.environ["TORCHINDUCTOR_CACHE_DIR"] = d + "/inductor"
os.environ["TRITON_CACHE_DIR"] = d + "/triton"
if variant in ("threads1", "both"):
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
t0 = time.monotonic()
import torch  # noqa: E402
import torch._dynamo  # noqa: E402,F401

t1 = time.monotonic()
if variant in ("preimport", "both"):
    import torch._inductor.compile_fx  # noqa: F401
    print("cuda initialised by the inductor import:", torch.cuda.is_initialized())
t2 = time.monotonic()
x = torch.randn(2**26, device="cuda")
torch.cuda.synchronize()
t3 = time.monotonic()
f = torch.compile(lambda x: x.cos().cos())
f(x)
torch.cuda.synchronize()
t4 = time.monotonic()
f(x)
torch.cuda.synchronize()
t5 = time.monotonic()
print(f"{variant:<10} import torch+dynamo {t1-t0:.2f}  preimport {t2-t1:.2f}  cuda init {t3-t2:.2f}  "
      f"first compile+call {t4-t3:.2f}  second call {t5-t4:.3f}")
