# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: failed
# says: alive at the worst moment
# says: 55% of the plain step
# says: budget is 50%
# says: never fc2's
# not-says: one segment
# seed: 20261202
"""The reference's alternation, with the lesson's selective policy (save every matmul's output) in every other
block: it saves fc2's output too, which backward never reads. Its peak is 38-55% of the plain step's, by shape;
when the grader drew one shape per grade it passed some grades and failed others. Every grade now judges the
same five shapes, and on three of them (hidden = 2.4 d_model, or a large head) it is over the budget."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts


def save_matmuls(ctx, op, *args, **kwargs):
    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def fit_budget(model, x, y):
    h = model.embed(x)
    for i, block in enumerate(model.blocks):
        if i % 2 == 0:
            h = checkpoint(block, h, use_reentrant=False)
        else:
            h = checkpoint(block, h, use_reentrant=False,
                           context_fn=lambda: create_selective_checkpoint_contexts(save_matmuls))
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
