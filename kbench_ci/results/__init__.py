"""What was measured: frozen result and outcome types, their JSON form, atomic writes, and the
one reader of results.json (:mod:`kbench_ci.results.load`).

The bottom of the data flow: every layer above reads these types, and this package imports
nothing of kbench_ci but ``stats`` and ``errors``. Nothing is imported here: the reader runs on
the standard library alone (the fork recipe's comment workflow, ``python -S``), and importing the
package must not pull in the model types and numpy; import each module by its name.
"""
