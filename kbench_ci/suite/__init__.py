"""The suite: kbench.toml's model (Suite, KernelSpec, Case), the one home of measuring defaults
(``settings``), and the loader that finds, parses and validates the file."""

from kbench_ci.suite.loader import find_config, load_suite, parse_threshold
from kbench_ci.suite.model import Case, KernelSpec, Suite
from kbench_ci.suite.settings import SuiteSettings, job_settings

__all__ = ["Case", "KernelSpec", "Suite", "SuiteSettings", "find_config", "job_settings", "load_suite", "parse_threshold"]
