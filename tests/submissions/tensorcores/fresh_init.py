"""Copies the weights into a freshly initialised bigger model: the padded rows and columns keep their random
values, so padded channels leak into the real ones and the logits change."""
import torch

from gpuprinciples.course.lab.models import TinyLM


def pad_model(model):
    def up(n):
        return -(-n // 8) * 8

    vocab, d = model.embed.weight.shape
    hidden = model.blocks[0].fc1.out_features
    padded = TinyLM(up(vocab), up(d), up(hidden), len(model.blocks)).to(model.head.weight)
    with torch.no_grad():
        padded.embed.weight[:vocab, :d] = model.embed.weight
        for new, old in zip(padded.blocks, model.blocks):
            new.fc1.weight[:hidden, :d] = old.fc1.weight
            new.fc1.bias[:hidden] = old.fc1.bias
            new.fc2.weight[:d, :hidden] = old.fc2.weight
            new.fc2.bias[:d] = old.fc2.bias
        padded.head.weight[:vocab, :d] = model.head.weight
    return padded
