"""The judge of ``--isolation judge``: a process no pull-request code runs in.

It loads only trusted code (the base's ref.py and setup() in ``compare``; the user's ref.py in
``bench`` and ``run``), draws every call's input contents from the OS's entropy, computes the
expected outputs and keeps them in its own memory, lends each side's worker buffers of its own
(shared memory on the CPU, CUDA IPC on a GPU), stages and poisons them before every call,
flushes the cache, checks every call's outputs, and decides correctness. Side workers
(:mod:`kbench_ci.side`) each run in a process of their own and only answer "call": what they
send back is parsed as untrusted data (:mod:`kbench_ci.wire.sideproto`).

An import-linter contract keeps this package from importing the code that loads or calls
kernels (``kbench_ci.measure.impls``, ``.child``, ``.rounds``, ``kbench_ci.side``).
"""
