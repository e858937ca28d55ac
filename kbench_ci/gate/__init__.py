"""The commands' work. ``run`` (:mod:`~kbench_ci.gate.run`) and ``compare``
(:mod:`~kbench_ci.gate.compare`, one case in :mod:`~kbench_ci.gate.compare_case`) share one suite
loop, :class:`~kbench_ci.gate.driver.SuiteDriver`, built from jobs (``jobs``), builds (``builds``),
lanes of warm workers (``lanes``, ``distribute``), the worker call (``worker_call``) and progress
(``progress``); verdicts are judged in ``verdicts``; ``bench`` and ``merge`` are pipelines of
their own. Each writes results.json (through :mod:`kbench_ci.results.writers`) and benchmark.md.

Nothing is imported here: ``bench`` reads CUDA signatures (whose type table needs torch), and
``compare``, ``run`` and ``merge`` must start without torch. Import the submodule you need.
"""
