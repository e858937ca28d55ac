"""``python -m kbench_ci``: the same command line as the ``kbench-ci`` script."""

from kbench_ci.cli.app import main

if __name__ == "__main__":
    main()
