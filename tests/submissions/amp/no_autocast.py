# exercise: amp.train_step
# function: amp_step
# verdict: failed
# says: 0% of matmul flops
# says: autocast
# seed: 20261202
"""Leaves the step in fp32: correct, but no matmul runs in bf16/fp16."""
import torch


def amp_step(model, optimizer, scaler, x, y, dtype):
    optimizer.zero_grad(set_to_none=True)
    loss = model.loss(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
