# exercise: distributed.allreduce_gradients
# function: allreduce_gradients
# verdict: passed
# Right: ReduceOp.AVG, NCCL's average. gloo has it too since PyTorch 2.8 (this package needs 2.11 or newer);
# a pin that the graded ranks keep accepting it on every supported PyTorch.
import torch.distributed as dist


def allreduce_gradients(model):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
