"""kbench-ci: a CI regression gate for GPU kernels."""

__version__ = "0.1.0"
