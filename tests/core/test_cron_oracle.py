"""next_fires against healthchecks' cronsim, which implements Debian cron's DST rule.

cronsim is a test-only oracle (the `test` extra). Whole-hour DST zones whose
clocks change away from midnight: cronsim mishandles Lord Howe's 30-minute
shift, and in zones that skip midnight (America/Santiago, America/Havana) it
fires a "* 0 * * *" job at the missing 00:00, which Debian cron does not.
Day-of-week steps are generated only over 0-6: cronsim reads "1/2" up to 7.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from scheduler.core import fires_between, next_fires

cronsim = pytest.importorskip("cronsim")

UTC = timezone.utc
ZONES = [
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "Europe/Helsinki",
    "Asia/Jerusalem",
    "Australia/Sydney",
    "Pacific/Auckland",
]
YEARS = (2023, 2024)
CASES_PER_ZONE = 60  # 7 zones x 60 = 420 expressions
HORIZON = timedelta(hours=30)
LIMIT = 200


def transitions(tz: ZoneInfo, year: int) -> list[datetime]:
    """The UTC instants at which the zone's offset changes during `year`."""
    out = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    offset = t.astimezone(tz).utcoffset()
    while t < end:
        nxt = t + timedelta(hours=1)
        if nxt.astimezone(tz).utcoffset() != offset:
            # clocks change on whole hours in these zones
            out.append(nxt)
            offset = nxt.astimezone(tz).utcoffset()
        t = nxt
    return out


def field(rng: random.Random, low: int, high: int, near: list[int], bare_step: bool = True) -> str:
    """One cron field, biased to the values around the clock change."""
    pick = rng.random()
    value = rng.choice(near) if near and rng.random() < 0.7 else rng.randint(low, high)
    if pick < 0.25:
        return "*"
    if pick < 0.4:
        return f"*/{rng.randint(2, max(2, (high - low) // 2))}"
    if pick < 0.65:
        return str(value)
    if pick < 0.75:
        end = min(high, value + rng.randint(1, 4))
        return f"{value}-{end}" if end > value else str(value)
    if pick < 0.85:
        other = rng.randint(low, high)
        return ",".join(str(v) for v in sorted({value, other}))
    if pick < 0.93:
        end = min(high, value + rng.randint(2, 8))
        return f"{value}-{end}/{rng.randint(2, 3)}" if end > value else str(value)
    if bare_step:
        return f"{value}/{rng.randint(2, 5)}"
    return str(value)


def expression(rng: random.Random, local_hours: list[int], local_day: int, weekday: int) -> str:
    minute = field(rng, 0, 59, [0, 30, 45, 59])
    hour = field(rng, 0, 23, local_hours)
    dom = "*" if rng.random() < 0.8 else field(rng, 1, 28, [local_day])
    dow = "*" if rng.random() < 0.8 else field(rng, 0, 6, [weekday], bare_step=False)
    return f"{minute} {hour} {dom} * {dow}"


def oracle(expr: str, tz: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    out = []
    for fire in cronsim.CronSim(expr, after.astimezone(tz)):
        instant = fire.astimezone(UTC)
        if instant > until or len(out) >= LIMIT:
            break
        out.append(instant)
    return out


def cases():
    rng = random.Random(20261203)
    for name in ZONES:
        tz = ZoneInfo(name)
        changes = [t for year in YEARS for t in transitions(tz, year)]
        assert changes, name
        for i in range(CASES_PER_ZONE):
            change = changes[i % len(changes)]
            before = change - timedelta(seconds=1)
            hours = sorted({before.astimezone(tz).hour, change.astimezone(tz).hour,
                            (before.astimezone(tz).hour + 1) % 24})
            local = change.astimezone(tz)
            # start at least an hour before the change: cronsim, asked from inside
            # a repeated hour, answers with times before the start
            after = change - timedelta(minutes=rng.randint(61, 20 * 60))
            yield pytest.param(
                expression(rng, hours, local.day, local.isoweekday() % 7), name, after,
                id=f"{name}-{i}",
            )


@pytest.mark.parametrize("expr, zone, after", list(cases()))
def test_fires_around_clock_changes_match_cronsim(expr, zone, after):
    until = after + HORIZON
    ours = fires_between(expr, zone, after, until, LIMIT)
    assert ours == oracle(expr, ZoneInfo(zone), after, until), expr


# --- the named cases -------------------------------------------------------------------
# 2024-03-31 in Berlin: 02:00 CET jumps to 03:00 CEST.

def _local(instants, zone="Europe/Berlin"):
    return [i.astimezone(ZoneInfo(zone)).strftime("%H:%M %Z") for i in instants]


def test_45_past_every_hour_skips_the_missing_hour_on_spring_forward_day():
    fires = next_fires("45 * * * *", "Europe/Berlin", datetime(2024, 3, 31, 0, 0, tzinfo=UTC), 3)
    assert _local(fires) == ["01:45 CET", "03:45 CEST", "04:45 CEST"]


def test_every_two_hours_does_not_fire_at_three_on_spring_forward_day():
    fires = next_fires("0 */2 * * *", "Europe/Berlin", datetime(2024, 3, 30, 22, 30, tzinfo=UTC), 3)
    assert _local(fires) == ["00:00 CET", "04:00 CEST", "06:00 CEST"]


@pytest.mark.parametrize("expr", ["45 * * * *", "0 */2 * * *", "30 2 * * *", "*/20 2 * * *", "0 0-6 * * *"])
@pytest.mark.parametrize("after", [datetime(2024, 3, 30, 20, tzinfo=UTC), datetime(2024, 10, 26, 20, tzinfo=UTC)])
def test_named_cases_agree_with_cronsim(expr, after):
    until = after + HORIZON
    assert fires_between(expr, "Europe/Berlin", after, until, LIMIT) == oracle(
        expr, ZoneInfo("Europe/Berlin"), after, until
    )


def test_six_field_expressions_follow_real_time_as_in_cronsim():
    # our sixth field (seconds) is last; cronsim reads seconds first
    after = datetime(2024, 3, 31, 0, 50, tzinfo=UTC)
    ours = next_fires("30 2 * * * 15", "Europe/Berlin", after, 2)
    theirs = cronsim.CronSim("15 30 2 * * *", after.astimezone(ZoneInfo("Europe/Berlin")))
    assert ours == [next(theirs).astimezone(UTC), next(theirs).astimezone(UTC)]
