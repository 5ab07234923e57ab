# exercise: amp.train_step
# function: amp_step
# verdict: failed
# says: master weights are not float32
# seed: 20261202
"""Casts the model to bf16/fp16 for good: every matmul is low precision, but the master weights are gone."""
import torch


def amp_step(model, optimizer, scaler, x, y, dtype):
    model.to(dtype)
    optimizer.zero_grad(set_to_none=True)
    loss = model.loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()
