# exercise: tensorcores.pad_model
# function: pad_model
# verdict: failed
# says: not aligned
# says: k=
# seed: 20261202
"""Pads the vocabulary (as nanoGPT does, 50257 -> 50304) but not the width or the hidden size."""
import torch

from gpuprinciples.course.lab.models import TinyLM


def pad_model(model):
    vocab, d = model.embed.weight.shape
    padded = TinyLM(-(-vocab // 64) * 64, d, model.blocks[0].fc1.out_features, len(model.blocks))
    padded = padded.to(model.head.weight)
    with torch.no_grad():
        padded.head.weight.zero_()
        padded.embed.weight[:vocab] = model.embed.weight
        padded.blocks.load_state_dict(model.blocks.state_dict())
        padded.head.weight[:vocab] = model.head.weight
    return padded
