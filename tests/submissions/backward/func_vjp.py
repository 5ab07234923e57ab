"""No backward of its own: torch.func.vjp of the math path computes the gradients, and one trivial Triton launch
is there to look like a kernel. Before, under the interpreter, the grader's placement watch raised
"Cannot access storage of TensorWrapper" inside torch.func (a GPU has no such watch), and the worker took that
NotImplementedError for an unsolved stub: "not attempted". It must fail for what it does, on both machines."""
# exercise: backward.attention_backward
# function: attention_backward
# verdict: failed
# says: pytorch operators did work
# cpu-says: were not written by a triton store
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)


def attention_backward(q, k, v, o, lse, do, causal=False):
    def attention(q, k, v):
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        if causal:
            n = q.shape[-2]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return torch.softmax(s.float(), -1).to(q.dtype) @ v

    _, pull = torch.func.vjp(attention, q, k, v)
    dq, dk, dv = pull(do)
    _copy[(1,)](dq, dq, 16, BLOCK=16)
    return dq, dk, dv
