"""Profile every Python process of a run (parent, workers) with cProfile.

    KBENCH_PROFILE_DIR=/tmp/prof PYTHONPATH=scripts/probes/profile_site:$PYTHONPATH python3 ...

Each process writes DIR/<pid>.pstats (its main thread's profile) and DIR/<pid>.argv (its wall
time so far and command line) every second and at exit: kbench-ci's workers end by a kill of
their process group, which runs no exit handler. Read them with ``python3
scripts/probes/profile_report.py DIR``. A probe for finding where wall time goes, not part of
kbench-ci (the profiler slows Python-heavy code: read shares, not absolute times).
"""

import atexit
import cProfile
import marshal
import os
import sys
import threading
import time

_dir = os.environ.get("KBENCH_PROFILE_DIR")
if _dir:
    os.makedirs(_dir, exist_ok=True)
    _profile = cProfile.Profile()
    _started = time.perf_counter()
    _lock = threading.Lock()

    def _dump() -> None:
        with _lock:
            pid = os.getpid()
            _profile.snapshot_stats()  # reads the counters; leaves the main thread profiled
            path = os.path.join(_dir, f"{pid}.pstats")
            with open(path + ".tmp", "wb") as handle:
                marshal.dump(_profile.stats, handle)
            os.replace(path + ".tmp", path)
            with open(os.path.join(_dir, f"{pid}.argv"), "w") as handle:
                handle.write(f"{time.perf_counter() - _started:.3f}s " + " ".join(sys.argv) + "\n")

    def _every_second() -> None:
        while True:
            time.sleep(1.0)
            try:
                _dump()
            except Exception:  # noqa: BLE001  (a probe: never break the process it watches)
                pass

    threading.Thread(target=_every_second, daemon=True).start()
    atexit.register(_dump)
    _profile.enable()
