"""No file over 400 lines (issue 34): every tracked .py file of scheduler/, etlsite/ and bench/ (migrations aside)."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 400
PARTS = ("scheduler", "etlsite", "bench")

# Over the limit on purpose, and why; test_pending_is_still_needed fails once an entry is back under the limit.
PENDING: set[str] = set()


def tracked_sources(root: Path = ROOT) -> list[str]:
    """The tracked .py files under PARTS, migrations aside, as paths relative to `root`."""
    out = subprocess.run(["git", "ls-files", "-z", "--", *PARTS], cwd=root, capture_output=True, text=True,
                         check=True).stdout
    return sorted(p for p in out.split("\0") if p.endswith(".py") and "migrations" not in Path(p).parts)


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def over_limit(root: Path, paths: list[str], *, limit: int = LIMIT) -> dict[str, int]:
    """Each of `paths` longer than `limit` lines, with its length (a tracked file deleted in the work tree: none)."""
    counts = {p: line_count(root / p) for p in paths if (root / p).exists()}
    return {p: n for p, n in counts.items() if n > limit}


def test_no_file_over_the_limit():
    offenders = {p: n for p, n in over_limit(ROOT, tracked_sources()).items() if p not in PENDING}
    assert not offenders, f"over {LIMIT} lines (split each by domain):\n" + "\n".join(
        f"  {p}: {n} lines" for p, n in sorted(offenders.items()))


def test_pending_is_still_needed():
    """An entry of PENDING now within the limit (or gone) is taken out of the set, so it cannot grow back unseen."""
    over = over_limit(ROOT, tracked_sources())
    stale = sorted(p for p in PENDING if p not in over)
    assert not stale, "within the limit now, remove from PENDING: " + ", ".join(stale)


def test_the_check_names_a_long_file_and_passes_a_short_one(tmp_path):
    (tmp_path / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * LIMIT)
    assert over_limit(tmp_path, ["long.py", "short.py"]) == {"long.py": LIMIT + 1}


def test_the_sources_found_are_the_tracked_ones_without_migrations():
    found = tracked_sources()
    assert "scheduler/selectors.py" in found and "etlsite/settings.py" in found and "bench/scale.py" in found
    assert not [p for p in found if "/migrations/" in p]
