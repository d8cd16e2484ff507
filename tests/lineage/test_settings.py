"""A bad ETL_LINEAGE fails at start-up with a message naming the variable."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_bad_lineage_mode_is_refused_naming_the_variable():
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["ETL_LINEAGE"] = "sometimes"
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert "ETL_LINEAGE: expected one of auto, on, off, got 'sometimes'" in done.stderr
