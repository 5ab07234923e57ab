# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: passed
# seed: 20261202
"""A right answer by another road: every other block checkpointed whole, the rest with a selective
policy that saves fc1's output (so only GELU is rerun there)."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts


def fit_budget(model, x, y):
    hidden = model.blocks[0].fc1.out_features

    def keep_fc1(ctx, op, *args, **kwargs):
        if op == torch.ops.aten.addmm.default and args[2].shape[-1] == hidden:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    h = model.embed(x)
    for i, block in enumerate(model.blocks):
        if i % 2 == 0:
            h = checkpoint(block, h, use_reentrant=False)
        else:
            h = checkpoint(block, h, use_reentrant=False,
                           context_fn=lambda: create_selective_checkpoint_contexts(keep_fc1))
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
