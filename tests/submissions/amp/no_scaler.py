# exercise: amp.train_step
# function: amp_step
# verdict: failed
# says: float16
# says: flush to zero
# says: gradscaler
# seed: 20261202
"""Autocast, but no loss scaling: in fp16 the small gradients flush to zero."""
import torch


def amp_step(model, optimizer, scaler, x, y, dtype):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype):
        loss = model.loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()
