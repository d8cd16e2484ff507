from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from scheduler.core import (
    ConfigError,
    describe_cron,
    fires_between,
    next_fires,
    next_interval_fires,
    validate_cron,
    validate_timezone,
)

UTC = timezone.utc
BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def local(instants, tz):
    return [i.astimezone(ZoneInfo(tz)).strftime("%m-%d %H:%M %Z") for i in instants]


def assert_steps(instants, step):
    assert all(b - a == step for a, b in zip(instants, instants[1:])), instants


# --- validation -------------------------------------------------------------


def test_validate_cron_normalises_whitespace():
    assert validate_cron("  0   *  * * * ") == "0 * * * *"


def test_six_field_cron_reads_seconds_last():
    assert validate_cron("0 * * * * 15") == "0 * * * * 15"
    fires = next_fires("0 * * * * 15", "UTC", utc(2024, 1, 1, 0, 0, 0), 2)
    assert fires == [utc(2024, 1, 1, 0, 0, 15), utc(2024, 1, 1, 1, 0, 15)]


def test_aliases_expand_to_five_fields():
    assert validate_cron("@hourly") == "0 * * * *"


@pytest.mark.parametrize(
    "expression", ["", "   ", "* * *", "0 0 * * * 0 2024", "61 * * * *", "a b c d e", "0 0 31 2 *"]
)
def test_bad_cron_raises_config_error_naming_the_field(expression):
    with pytest.raises(ConfigError) as info:
        validate_cron(expression)
    assert info.value.field == "cron"
    assert str(info.value).startswith("cron: ")


def test_croniter_message_is_passed_on():
    with pytest.raises(ConfigError, match="out of range"):
        validate_cron("61 * * * *")


def test_unknown_timezone_raises_config_error_naming_the_field():
    with pytest.raises(ConfigError) as info:
        validate_timezone("Mars/Base")
    assert info.value.field == "timezone"
    assert "unknown time zone 'Mars/Base'" in str(info.value)
    assert validate_timezone("Europe/Berlin") == ZoneInfo("Europe/Berlin")


def test_next_fires_refuses_bad_input_through_the_same_errors():
    with pytest.raises(ConfigError) as info:
        next_fires("0 * * * *", "Nowhere/Land", utc(2024, 1, 1), 1)
    assert info.value.field == "timezone"


# --- plain fires ----------------------------------------------------------------


def test_next_fires_are_strictly_after_and_aware_utc():
    fires = next_fires("0 * * * *", "UTC", utc(2024, 1, 1, 10, 0), 3)
    assert fires == [utc(2024, 1, 1, 11), utc(2024, 1, 1, 12), utc(2024, 1, 1, 13)]
    assert all(f.tzinfo is UTC for f in fires)


def test_cron_is_evaluated_in_the_schedules_time_zone():
    # 09:00 in Berlin in winter is 08:00 UTC, in summer 07:00 UTC.
    assert next_fires("0 9 * * *", BERLIN, utc(2024, 1, 10), 1) == [utc(2024, 1, 10, 8)]
    assert next_fires("0 9 * * *", BERLIN, utc(2024, 7, 10), 1) == [utc(2024, 7, 10, 7)]


def test_fires_between_is_half_open_and_bounded_by_limit():
    fires = fires_between("*/15 * * * *", "UTC", utc(2024, 1, 1, 0, 0), utc(2024, 1, 1, 1, 0), 10)
    assert fires == [utc(2024, 1, 1, 0, m) for m in (15, 30, 45)] + [utc(2024, 1, 1, 1, 0)]
    assert len(fires_between("* * * * *", "UTC", utc(2024, 1, 1), utc(2024, 1, 2), 5)) == 5
    assert fires_between("0 * * * *", "UTC", utc(2024, 1, 1, 1), utc(2024, 1, 1, 1), 5) == []


# --- DST: spring forward (a local time that does not exist) -----------------------


def test_berlin_spring_forward_gap_fires_once_at_the_next_valid_instant():
    # 2024-03-31: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    fires = next_fires("30 2 * * *", BERLIN, utc(2024, 3, 30, 12), 3)
    assert fires == [utc(2024, 3, 31, 1, 0), utc(2024, 4, 1, 0, 30), utc(2024, 4, 2, 0, 30)]
    assert local(fires[:1], BERLIN) == ["03-31 03:00 CEST"]


def test_new_york_spring_forward_gap_fires_once_at_the_next_valid_instant():
    # 2024-03-10: 02:00 EST jumps to 03:00 EDT.
    fires = next_fires("30 2 * * *", NEW_YORK, utc(2024, 3, 9, 12), 2)
    assert fires == [utc(2024, 3, 10, 7, 0), utc(2024, 3, 11, 6, 30)]
    assert local(fires[:1], NEW_YORK) == ["03-10 03:00 EDT"]


def test_minutely_cron_follows_real_time_so_the_missing_hour_never_fires():
    # "*" starts the minute field: a wildcard job, which fires only at wall
    # times that happen; 02:xx does not happen on 2024-03-31 in Berlin.
    fires = next_fires("* 2 * * *", BERLIN, utc(2024, 3, 31, 0, 0), 2)
    assert fires == [utc(2024, 4, 1, 0, 0), utc(2024, 4, 1, 0, 1)]


def test_fixed_times_in_the_gap_collapse_to_one_fire_at_the_first_valid_minute():
    fires = next_fires("0,15,30 2 * * *", BERLIN, utc(2024, 3, 31, 0, 0), 2)
    assert local(fires, BERLIN) == ["03-31 03:00 CEST", "04-01 02:00 CEST"]


def test_day_of_month_and_weekday_are_anded_when_either_starts_with_a_star():
    # Vixie/Debian cron: "*/2" days AND Mondays; croniter alone would OR them.
    fires = next_fires("0 0 */2 * 1", "UTC", utc(2024, 1, 1), 2)
    assert fires == [utc(2024, 1, 15), utc(2024, 1, 29)]
    # neither starts with "*": either field may match
    assert next_fires("0 0 2 * 1", "UTC", utc(2024, 1, 1), 2) == [utc(2024, 1, 2), utc(2024, 1, 8)]


# --- DST: fall back (a repeated local time) --------------------------------------


def test_berlin_fall_back_repeated_time_fires_once_at_its_first_occurrence():
    # 2024-10-27: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    fires = next_fires("30 2 * * *", BERLIN, utc(2024, 10, 26, 12), 2)
    assert fires == [utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)]
    assert local(fires, BERLIN) == ["10-27 02:30 CEST", "10-28 02:30 CET"]


def test_new_york_fall_back_repeated_time_fires_once_at_its_first_occurrence():
    # 2024-11-03: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    fires = next_fires("30 1 * * *", NEW_YORK, utc(2024, 11, 2, 12), 2)
    assert fires == [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)]


def test_a_fixed_time_cron_does_not_fire_again_in_the_second_pass():
    # Asked from inside the repeated hour, after the first 02:30 already fired.
    fires = next_fires("30 2 * * *", BERLIN, utc(2024, 10, 27, 0, 45), 1)
    assert fires == [utc(2024, 10, 28, 1, 30)]


# --- DST: hourly and minutely crons across both transitions ---------------------
# Debian cron's rule (see scheduler/core/cron.py): a cron whose minute or hour
# field starts with "*" follows real time, firing in both passes of a repeated
# hour and never in a missing one; a cron that names its minute and hour fires once.


@pytest.mark.parametrize(
    "tz, after",
    [
        (BERLIN, utc(2024, 3, 30, 22)),  # spring forward
        (BERLIN, utc(2024, 10, 26, 22)),  # fall back
        (NEW_YORK, utc(2024, 3, 10, 3)),
        (NEW_YORK, utc(2024, 11, 3, 2)),
    ],
)
def test_hourly_cron_neither_skips_nor_duplicates_instants_across_dst(tz, after):
    fires = next_fires("0 * * * *", tz, after, 8)
    assert fires[0] == after + timedelta(hours=1)
    assert_steps(fires, timedelta(hours=1))


def test_hourly_cron_in_berlin_fall_back_runs_both_passes_of_the_repeated_hour():
    fires = next_fires("0 * * * *", BERLIN, utc(2024, 10, 26, 23, 30), 4)
    assert local(fires, BERLIN) == ["10-27 02:00 CEST", "10-27 02:00 CET", "10-27 03:00 CET", "10-27 04:00 CET"]


def test_hourly_cron_in_berlin_spring_forward_has_no_phantom_hour():
    fires = next_fires("0 * * * *", BERLIN, utc(2024, 3, 30, 23, 30), 3)
    assert local(fires, BERLIN) == ["03-31 01:00 CET", "03-31 03:00 CEST", "03-31 04:00 CEST"]


@pytest.mark.parametrize("tz, after", [(NEW_YORK, utc(2024, 11, 3, 4, 30)), (BERLIN, utc(2024, 10, 26, 23, 30))])
def test_quarter_hourly_cron_is_steady_through_fall_back(tz, after):
    fires = next_fires("*/15 * * * *", tz, after, 16)
    assert fires[0] == after + timedelta(minutes=15)
    assert_steps(fires, timedelta(minutes=15))


def test_asking_from_the_second_pass_continues_in_real_time():
    # 01:10 UTC is 02:10 CET, the second 02:10 of the night.
    fires = next_fires("*/20 * * * *", BERLIN, utc(2024, 10, 27, 1, 10), 3)
    assert fires == [utc(2024, 10, 27, 1, 20), utc(2024, 10, 27, 1, 40), utc(2024, 10, 27, 2, 0)]


def test_minutely_cron_across_spring_forward_is_steady():
    fires = next_fires("* * * * *", NEW_YORK, utc(2024, 3, 10, 6, 55), 10)
    assert_steps(fires, timedelta(minutes=1))


def test_catch_up_across_fall_back_lists_every_real_hour_once():
    fires = fires_between("0 * * * *", BERLIN, utc(2024, 10, 26, 21), utc(2024, 10, 27, 5), 100)
    assert fires == [utc(2024, 10, 26, 22) + timedelta(hours=h) for h in range(8)]


# --- describe and interval --------------------------------------------------------


def test_describe_cron_uses_plain_words_and_names_the_zone():
    assert describe_cron("0 * * * *", BERLIN) == "Every hour, Europe/Berlin"
    assert describe_cron("0 * * * * 15", "UTC").startswith("At 15 seconds past the minute")


def test_describe_cron_falls_back_to_the_expression():
    assert describe_cron("nonsense", "UTC") == "nonsense, UTC"


def test_interval_fires_are_anchor_multiples_strictly_after():
    anchor = utc(2024, 1, 1)
    assert next_interval_fires(anchor, 600, utc(2024, 1, 1, 0, 10), 2) == [
        utc(2024, 1, 1, 0, 20),
        utc(2024, 1, 1, 0, 30),
    ]
    assert next_interval_fires(anchor, 600, utc(2023, 12, 31), 1) == [anchor]


def test_interval_fires_do_not_drift_after_many_steps():
    anchor = utc(2024, 1, 1)
    (fire,) = next_interval_fires(anchor, 0.1, anchor + timedelta(days=365), 1)
    assert fire == anchor + timedelta(days=365, milliseconds=100)


def test_interval_must_be_positive():
    with pytest.raises(ConfigError) as info:
        next_interval_fires(utc(2024, 1, 1), 0, utc(2024, 1, 1), 1)
    assert info.value.field == "every_seconds"
