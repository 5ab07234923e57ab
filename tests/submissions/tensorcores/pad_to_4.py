# exercise: tensorcores.pad_model
# function: pad_model
# verdict: failed
# not-says: float32 vocab
# says: not aligned
# says: bfloat16
# says: multiple of 8
# seed: 20261202
"""Pads every size to a multiple of 4: 16 bytes in fp32, but only 8 bytes in bf16."""
import torch

from gpuprinciples.course.lab.models import TinyLM


def pad_model(model):
    def up(n):
        return -(-n // 4) * 4

    vocab, d = model.embed.weight.shape
    hidden = model.blocks[0].fc1.out_features
    padded = TinyLM(up(vocab), up(d), up(hidden), len(model.blocks)).to(model.head.weight)
    with torch.no_grad():
        for p in padded.parameters():
            p.zero_()
        padded.embed.weight[:vocab, :d] = model.embed.weight
        for new, old in zip(padded.blocks, model.blocks):
            new.fc1.weight[:hidden, :d] = old.fc1.weight
            new.fc1.bias[:hidden] = old.fc1.bias
            new.fc2.weight[:d, :hidden] = old.fc2.weight
            new.fc2.bias[:d] = old.fc2.bias
        padded.head.weight[:vocab, :d] = model.head.weight
    return padded
