"""A right step written as PyTorch's examples write it, `torch.autocast(device_type="cuda", ...)`: on a CPU
PyTorch disabled that context (no GPU), the step ran in fp32, and it failed here ("only 0% of matmul FLOPs ran
in bf16/fp16") where a GPU passes it. Where PyTorch has no GPU, the CPU stands in for one: it autocasts there."""
# exercise: amp.train_step
# function: amp_step
# verdict: passed
import torch


def amp_step(model, optimizer, scaler, x, y, dtype):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type="cuda", dtype=dtype):
        loss = model.loss(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
