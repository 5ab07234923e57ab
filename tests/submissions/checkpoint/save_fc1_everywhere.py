"""Keeps fc1's output in every block and recomputes only GELU: nothing expensive is rerun, but each
block still keeps its input and its widest activation, more than half of the plain step's memory."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts


def fit_budget(model, x, y):
    hidden = model.blocks[0].fc1.out_features

    def keep_fc1(ctx, op, *args, **kwargs):
        # fc1 is the addmm whose output is `hidden` wide
        if op == torch.ops.aten.addmm.default and args[2].shape[-1] == hidden:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    h = model.embed(x)
    for block in model.blocks:
        h = checkpoint(block, h, use_reentrant=False,
                       context_fn=lambda: create_selective_checkpoint_contexts(keep_fc1))
    return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
