# exercise: checkpoint.fit_budget
# function: fit_budget
# verdict: failed
# says: kept for backward
# says: budget is 50%
# seed: 20261202
# mutant-of: checkpoint/selective_mix.py
"""Keeps fc1's output in every block and recomputes only GELU: nothing expensive is rerun, but each
block still keeps its input and its widest activation, more than half of the plain step's memory."""
# @@
#      def keep_fc1(ctx, op, *args, **kwargs):
# +        # fc1 is the addmm whose output is `hidden` wide
#          if op == torch.ops.aten.addmm.default and args[2].shape[-1] == hidden:
# @@
#      h = model.embed(x)
# -    for i, block in enumerate(model.blocks):
# -        if i % 2 == 0:
# -            h = checkpoint(block, h, use_reentrant=False)
# -        else:
# -            h = checkpoint(block, h, use_reentrant=False,
# -                           context_fn=lambda: create_selective_checkpoint_contexts(keep_fc1))
# +    for block in model.blocks:
# +        h = checkpoint(block, h, use_reentrant=False,
# +                       context_fn=lambda: create_selective_checkpoint_contexts(keep_fc1))
#      return F.cross_entropy(model.head(h).flatten(0, 1).float(), y.flatten())
