"""CUDA C++ solutions: compile them with nvcc (:mod:`~kbench_ci.cuda.build`), read the
``extern "C" solve`` signature to bind (:mod:`~kbench_ci.cuda.signature`), and ask the driver
which GPUs there are (:mod:`~kbench_ci.cuda.driver`).

Nothing is imported here: the signature's type table needs torch, and the parent process (the
command line, the builds) must start without it. Import the submodule you need.
"""
