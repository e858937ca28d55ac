"""Children of the stop-signal tests start with Ctrl-C, SIGTERM and SIGHUP at their defaults.

kbench-ci keeps a signal that it inherits as ignored ignored (`nohup kbench-ci ...` must survive
the terminal closing), and a test run started with `nohup`, or as a background job of a
non-interactive shell (which ignores SIGINT for it), hands those dispositions down to every
child: a test that signals its child would then time out, though nothing is wrong with the
code. A clean-clone CI run started as `nohup bash .ci/run &` fails so.
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def heed_stop_signals() -> None:
    """``preexec_fn`` for a child that must obey the stop signals whatever the test run ignores."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
