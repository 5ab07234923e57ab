"""Wrong: dO goes to kernels that read it as a contiguous [B, H, N, D] however it arrives. In a model that joins
the heads after attention (o.transpose(1, 2).reshape(...), lesson 12's TinyLM) it arrives strided and the gradients
are wrong; the grader handed over a contiguous dO only, so this passed on both machines. Now the strided cases'
dO arrives strided."""
# exercise: backward.attention_function
# function: attention
# verdict: failed
# says: values wrong (case b=
# says: there do arrives strided too
# mutant-of: backward/function_contiguous_do.py
# @@
#          q, k, v, o, lse = ctx.saved_tensors
# -        do = do if do.is_contiguous() else do.contiguous()
#          delta = torch.empty_like(lse)
