"""Receipts (SPEC section 10): ``verify`` re-derives every recorded fact of a run directory offline.

result = verify_run(path)          # raises VerifyError (exit 2) for a malformed or incomplete directory
result.ok, result.lines()          # ["MATCH"] or one "run_id: field: detail" line per divergence
seal_problems(path)                # the seal check alone (no re-execution): what changed since the run
"""

from contextdelta.verify._verify import (
    Divergence,
    VerifyError,
    VerifyResult,
    load_run,
    seal_problems,
    verify_run,
)

__all__ = ["Divergence", "VerifyError", "VerifyResult", "load_run", "seal_problems", "verify_run"]
