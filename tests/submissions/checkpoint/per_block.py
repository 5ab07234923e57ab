# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: failed
# says: recomputed 0.4
# says: at most 0.3× allowed
# says: keep fc1's output in some blocks
# seed: 20261202
"""Checkpoints every block whole (the answer to this exercise's old, looser budget): memory fits, but
backward reruns every block's fc1, about half a forward's matmul FLOPs."""
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def fit_budget(model, x, y):
    h = model.embed(x)
    for block in model.blocks:
        h = checkpoint(block, h, use_reentrant=False)
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
