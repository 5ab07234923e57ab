"""Right: the step zeroes the gradients after its update, in place (`set_to_none=False`), where the reference zeroes
them before its backward. The update used the right gradients, but the grader read them after the step and found
zeros ("the gradient ... is 100.0% away from fp32's ... small gradients flush to zero"); with `set_to_none=True` it
said there was none. The grader now reads the gradients as the optimizer steps, which is what "the gradients the
first update used" means."""
# exercise: amp.train_step
# function: amp_step
# verdict: passed
import torch


def amp_step(model, optimizer, scaler, x, y, dtype):
    with torch.autocast(x.device.type, dtype=dtype):
        loss = model.loss(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=False)  # ready for the next step: the gradients are zeros from here
    return loss.detach()
