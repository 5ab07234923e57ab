# exercise: flash.attention
# function: attention
# verdict: failed
# says: values wrong
# seed: 8
# mutant-of: flash/good_pointers.py
"""Wrong: K and V are found at (batch × heads + head) × the head stride, skipping the batch stride, which holds only
for a contiguous [B, H, N, D]. Q and O use all their strides. Every case with K and V in another layout had one
batch, so the CPU passed it where the H200's two-batch packed K/V case fails it; the CPU's strided and packed
cases now have two batches."""
# @@
# -        k = tl.load(K + b * skb + h * skh + keys[:, None] * skn + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
# -        v = tl.load(V + b * svb + h * svh + keys[:, None] * svn + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
# +        k = tl.load(K + bh * skh + keys[:, None] * skn + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
# +        v = tl.load(V + bh * svh + keys[:, None] * svn + offs_d[None, :], mask=keys[:, None] < N, other=0.0)
