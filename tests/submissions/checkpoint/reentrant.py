# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: failed
# says: got no gradient
# says: use_reentrant=false
# seed: 20261202
"""Every block checkpointed with use_reentrant=True: the blocks' input comes from a frozen embedding and
does not require grad, so the reentrant checkpoint's output does not either, and the blocks get no gradient."""
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def fit_budget(model, x, y):
    h = model.embed(x)
    for block in model.blocks:
        h = checkpoint(block, h, use_reentrant=True)
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
