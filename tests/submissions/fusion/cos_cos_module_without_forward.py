"""A module whose forward is misspelt: calling it runs torch.nn.Module's own forward, which raises
NotImplementedError inside PyTorch. That is an error of an attempt, to be reported in PyTorch's words; only a
NotImplementedError raised in the learner's own file is an unsolved stub ("not attempted")."""
# exercise: fusion.cos_cos
# function: cos_cos
# verdict: failed
# says: raised on
# says: notimplementederror
# says: missing the required "forward" function
import torch


class CosCos(torch.nn.Module):
    def forwrd(self, x):
        return torch.cos(torch.cos(x))


def cos_cos(x):
    return CosCos()(x)
