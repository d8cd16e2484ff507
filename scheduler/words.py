"""One way to write a status word on every page (issue 37): upper case, and a node's SUCCESS is SUCCEEDED."""
from __future__ import annotations

# the words that differ between the ledgers: a node's outcome (NodeOutcome) and a run's status (RunStatus)
SAME_WORD = {"SUCCESS": "SUCCEEDED", "HALF_OPEN": "HALF-OPEN"}


def status_word(value) -> str:
    """'SUCCESS', 'succeeded', 'Succeeded' -> 'SUCCEEDED'; 'half_open' -> 'HALF-OPEN'; empty -> 'NONE'."""
    word = str(value or "none").strip().upper().replace(" ", "_")
    return SAME_WORD.get(word, word).replace("_", " ")


__all__ = ["status_word"]
