# exercise: amp.train_step
# function: amp_step
# verdict: failed
# says: float16
# says: unscale_
# seed: 20261202
"""Scales the loss but clips the *scaled* gradients: after unscaling they are 65536 times too small."""
import torch


def amp_step(model, optimizer, scaler, x, y, dtype):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype):
        loss = model.loss(x, y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
