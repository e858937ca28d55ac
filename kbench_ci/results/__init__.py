"""What was measured: frozen result and outcome types, their JSON form, atomic writes.

The bottom of the data flow: every layer above reads these types, and this package imports
nothing of kbench_ci but ``stats`` and ``errors``.
"""

from kbench_ci.results.atomic import write_json_atomically, write_text_atomically
from kbench_ci.results.model import (
    CaseResult,
    CorrectnessResult,
    MeasureSettings,
    OutputCheck,
    Tolerance,
    TrialCheck,
    VariantResult,
)
from kbench_ci.results.outcome import (
    BuildOutcome,
    CaseComparison,
    CompareOutcome,
    CompareRequest,
    Gate,
    PhaseTimes,
    RevisionInfo,
    RunCase,
    RunOutcome,
    RunRequest,
)
from kbench_ci.results.schema import to_jsonable, variant_from_json

__all__ = [
    "BuildOutcome",
    "CaseComparison",
    "CaseResult",
    "CompareOutcome",
    "CompareRequest",
    "CorrectnessResult",
    "Gate",
    "MeasureSettings",
    "OutputCheck",
    "PhaseTimes",
    "RevisionInfo",
    "RunCase",
    "RunOutcome",
    "RunRequest",
    "Tolerance",
    "TrialCheck",
    "VariantResult",
    "to_jsonable",
    "variant_from_json",
    "write_json_atomically",
    "write_text_atomically",
]
