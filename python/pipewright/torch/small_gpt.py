"""A small GPT built of torch layers: a token and position embedding, pre-norm decoder blocks (causal
self-attention, then a GELU MLP, each with its residual) and a head. It is the model the PyTorch checks
(python/tests/test_torch_pipelining.py) and the benchmark (bench/torch_pipelining.py) profile, plan and run
through torch.distributed.pipelining; everything here pickles, as the runtime's spawned ranks need."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class GptShape:
    vocab: int
    hidden: int
    heads: int
    ffn: int
    seq: int
    blocks: int


class Embedding(nn.Module):
    def __init__(self, shape: GptShape):
        super().__init__()
        self.tokens = nn.Embedding(shape.vocab, shape.hidden)
        self.positions = nn.Embedding(shape.seq, shape.hidden)

    def forward(self, ids):
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))


class Block(nn.Module):
    def __init__(self, shape: GptShape):
        super().__init__()
        self.heads = shape.heads
        self.norm1, self.norm2 = nn.LayerNorm(shape.hidden), nn.LayerNorm(shape.hidden)
        self.qkv, self.proj = nn.Linear(shape.hidden, 3 * shape.hidden), nn.Linear(shape.hidden, shape.hidden)
        self.up, self.down = nn.Linear(shape.hidden, shape.ffn), nn.Linear(shape.ffn, shape.hidden)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, h)
        x = x + self.proj(a)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Head(nn.Module):
    def __init__(self, shape: GptShape):
        super().__init__()
        self.norm, self.out = nn.LayerNorm(shape.hidden), nn.Linear(shape.hidden, shape.vocab)

    def forward(self, x):
        return self.out(self.norm(x))


def layers(shape: GptShape) -> list:
    """The pipeline's layers in order: the embedding, the blocks, the head."""
    return [Embedding(shape), *(Block(shape) for _ in range(shape.blocks)), Head(shape)]


def loss(logits, target):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def token_batch(shape: GptShape, sequences: int, seed: int = 1) -> tuple:
    """`sequences` random token sequences and their next-token targets (the same for the same seed)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, shape.vocab, (sequences, shape.seq), generator=g)
    return ids, torch.roll(ids, -1, dims=1)
