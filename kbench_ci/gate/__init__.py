"""The commands' work: run cases (``execute``), judge them (``verdicts``), and the three
pipelines ``bench`` (:mod:`~kbench_ci.gate.bench`), ``run`` (:mod:`~kbench_ci.gate.run`) and
``compare`` (:mod:`~kbench_ci.gate.compare`), each writing results.json and benchmark.md.

Nothing is imported here: ``bench`` reads CUDA signatures (whose type table needs torch), and
``compare``, ``run`` and ``merge`` must start without torch. Import the submodule you need.
"""
