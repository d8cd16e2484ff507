"""The README's incremental example sets `lag` and `overlap` and says why (issue 32, point 9)."""
from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import yaml

from scheduler.core import WatermarkConfig

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readmes_incremental_schedule_sets_lag_and_overlap_and_the_readme_says_why():
    text = README.read_text()
    block = re.search(r"```yaml\n# schedules.yaml\n(.*?)```", text, re.S).group(1)
    entry = next(s for s in yaml.safe_load(block)["schedules"] if s["name"] == "orders_sync")
    config = WatermarkConfig.from_dict(entry["watermark_config"])
    assert (config.lag, config.overlap) == (timedelta(seconds=120), timedelta(seconds=300))
    why = text[text.index(block):]
    assert "`lag` and `overlap` keep an incremental load from skipping rows" in why and "skipped for good" in why
