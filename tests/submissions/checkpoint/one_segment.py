# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: failed
# says: alive at the worst moment
# says: one segment
# says: the peak is unchanged
# seed: 20261202
"""One checkpoint around all the blocks: little is kept during the forward, but backward recomputes
every block at once, so the peak is the plain step's."""
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def fit_budget(model, x, y):
    def blocks(h):
        for block in model.blocks:
            h = block(h)
        return h

    h = checkpoint(blocks, model.embed(x), use_reentrant=False)
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
