# exercise: amp.train_step
# function: amp_step
# verdict: failed
# says: of matmul flops ran in bf16/fp16
# says: 95%
# seed: 20261202
"""Autocasts the blocks but runs the head (a fifth of the FLOPs here) in fp32."""
import torch
import torch.nn.functional as F


def amp_step(model, optimizer, scaler, x, y, dtype):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype):
        h = model.embed(x)
        for block in model.blocks:
            h = block(h)
    logits = model.head(h.float())
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
