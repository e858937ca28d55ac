"""Beside pull-request code: the worker of one side of a case under ``--isolation judge``; the sandbox of a head's build command.

Everything in this package runs in a process that loads one side's solution (or one baseline),
so it is only as trustworthy as that code: it times the calls it is asked for and writes
into buffers the judge lent it. It never sees the expected outputs, never makes the contents
it is timed on, and decides nothing (:mod:`kbench_ci.judge` does). :mod:`.harden` narrows what
the process may do before any of that code is loaded; :mod:`.sandboxed` runs a compare's head's
own build command under the same layers.
"""
