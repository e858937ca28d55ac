"""The red-team corpus (tests/fixtures/redteam), named once for its CPU and its GPU tests."""

from __future__ import annotations

from pathlib import Path

REDTEAM = Path(__file__).resolve().parents[1] / "fixtures" / "redteam"
HONEST = REDTEAM / "honest"
REDTEAM_CUDA = REDTEAM / "cuda"
MATMUL_REF = REDTEAM / "ref_matmul.py"
MASKED_REF = HONEST / "ref_masked.py"

#: every Python cheat of the corpus (all matmuls against MATMUL_REF); each must be incorrect
PYTHON_CHEATS = (
    "cache_by_identity",
    "cache_by_identity_fixed_seed",
    "cache_by_pointer",
    "cache_by_sampled_fingerprint",
    "cache_by_content_hash",
    "cache_lru4",
    "cache_after_two_views",
    "skip_if_same_as_last",
    "cache_by_sum_key",
    "cache_in_output_buffer",
    "cache_returns_new_tensor",
)
