"""Reference for rmsnorm.py. ``baseline="flashinfer"`` runs flashinfer's fused kernel instead."""

import torch


def reference(x, weight, y, eps, baseline=None, **_):
    if baseline == "flashinfer":
        import flashinfer

        return flashinfer.norm.rmsnorm(x, weight, eps=eps)
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
