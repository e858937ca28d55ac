"""PyTorch reference for layernorm.py: same kwargs as the solution; returns the output."""

import torch


def reference(x, weight, bias, y, eps, baseline=None, **_):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)
