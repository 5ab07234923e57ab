# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: failed
# says: recomputed
# says: at most 0.3× allowed
# says: nested
# seed: 20261202
"""Checkpoints segments of four blocks and every block inside them: the inner layers are recomputed twice."""
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def fit_budget(model, x, y):
    def segment(h, blocks):
        for block in blocks:
            h = checkpoint(block, h, use_reentrant=False)
        return h

    h = model.embed(x)
    blocks = list(model.blocks)
    for i in range(0, len(blocks), 4):
        h = checkpoint(segment, h, blocks[i:i + 4], use_reentrant=False)
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
