import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import (
    ConfigError,
    WatermarkConfig,
    WatermarkState,
    WatermarkType,
    Window,
    advance,
    compute_window,
    compute_windows,
    reached_until,
    split_windows,
)

UTC = timezone.utc
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


def dt_config(**kwargs):
    kwargs.setdefault("initial", NOW - 10 * H)
    return WatermarkConfig(type=WatermarkType.DATETIME, column="updated_at", **kwargs)


# --- datetime watermarks ----------------------------------------------------


def test_first_window_starts_at_the_initial_value_and_stops_at_now_minus_lag():
    window = compute_window(dt_config(lag=timedelta(minutes=5)), WatermarkState(None), NOW)
    assert window == Window(NOW - 10 * H, NOW - timedelta(minutes=5))


def test_overlap_rereads_before_the_mark_and_max_window_caps_the_high_end():
    config = dt_config(overlap=timedelta(minutes=10), max_window=2 * H)
    window = compute_window(config, WatermarkState(NOW - 5 * H), NOW)
    assert window == Window(NOW - 5 * H - timedelta(minutes=10), NOW - 3 * H)


def test_no_window_when_nothing_new_can_be_read():
    config = dt_config(lag=H)
    assert compute_window(config, WatermarkState(NOW - H), NOW) is None
    assert compute_window(config, WatermarkState(NOW - 30 * timedelta(minutes=1)), NOW) is None


def test_a_long_gap_splits_into_consecutive_windows():
    windows = compute_windows(dt_config(max_window=3 * H), WatermarkState(None), NOW)
    assert [w.high - w.low for w in windows] == [3 * H, 3 * H, 3 * H, H]
    assert windows[-1].high == NOW
    assert compute_windows(dt_config(max_window=3 * H), WatermarkState(None), NOW, limit=2) == windows[:2]


def test_datetime_mark_advances_to_the_window_high_and_never_backwards():
    config = dt_config()
    window = Window(NOW - 2 * H, NOW - H)
    assert advance(config, WatermarkState(NOW - 2 * H), window, None) == WatermarkState(NOW - H)
    assert advance(config, WatermarkState(NOW), window, None) == WatermarkState(NOW)


def test_a_datetime_watermark_without_initial_value_is_a_config_error_when_computed():
    with pytest.raises(ConfigError) as info:
        compute_window(WatermarkConfig(), WatermarkState(None), NOW)
    assert info.value.field == "initial"


# --- integer watermarks -----------------------------------------------------


def int_config(**kwargs):
    return WatermarkConfig(type=WatermarkType.INTEGER, column="id", **kwargs)


def test_integer_window_is_open_ended_without_max_window():
    assert compute_window(int_config(initial=100, overlap=5), WatermarkState(None), NOW) == Window(95, None)
    assert compute_window(int_config(), WatermarkState(None), NOW) == Window(0, None)


def test_integer_window_is_capped_by_max_window():
    window = compute_window(int_config(overlap=5, max_window=1000), WatermarkState(500), NOW)
    assert window == Window(495, 1500)


def test_integer_mark_moves_to_the_largest_value_loaded_and_never_backwards():
    config = int_config(initial=10)
    window = Window(10, None)
    assert advance(config, WatermarkState(None), window, 42) == WatermarkState(42)
    assert advance(config, WatermarkState(50), window, 42) == WatermarkState(50)
    assert advance(config, WatermarkState(50), window, None) == WatermarkState(50)


# --- configuration ------------------------------------------------------------


def test_config_round_trips_through_json_for_both_types():
    for config in (
        dt_config(lag=timedelta(seconds=30), overlap=timedelta(minutes=1), max_window=6 * H),
        int_config(initial=7, overlap=3, max_window=100),
    ):
        assert WatermarkConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_from_dict_reads_seconds_and_iso_datetimes():
    config = WatermarkConfig.from_dict(
        {"type": "datetime", "column": "ts", "initial": "2024-01-01T00:00:00+01:00", "lag": 60, "max_window": 3600}
    )
    assert config.initial == datetime(2023, 12, 31, 23, 0, tzinfo=UTC)
    assert config.lag == timedelta(minutes=1) and config.max_window == H
    assert config.overlap == timedelta(0)


@pytest.mark.parametrize(
    "data, field, message",
    [
        ({"max_window": 0}, "max_window", "watermark.max_window: must be a positive number of seconds"),
        ({"max_window": "big"}, "max_window", "watermark.max_window: must be a positive number of seconds"),
        ({"lag": -1}, "lag", "watermark.lag"),
        ({"overlap": -5}, "overlap", "watermark.overlap"),
        ({"type": "float"}, "type", "must be 'datetime' or 'integer'"),
        ({"initial": "yesterday"}, "initial", "not an ISO 8601"),
        ({"type": "integer", "initial": "5"}, "initial", "whole number"),
        ({"type": "integer", "max_window": -1}, "max_window", "watermark.max_window"),
        ({"column": "x", "colum": "y"}, "colum", "unknown setting"),
    ],
)
def test_bad_user_input_names_the_field(data, field, message):
    with pytest.raises(ConfigError) as info:
        WatermarkConfig.from_dict(data)
    assert info.value.field == field
    assert message in str(info.value)


def test_non_mapping_input_is_refused():
    with pytest.raises(ConfigError) as info:
        WatermarkConfig.from_dict([1, 2])
    assert info.value.field == "watermark"


def test_constructor_refuses_wrong_types():
    with pytest.raises(ConfigError) as info:
        WatermarkConfig(initial=datetime(2024, 1, 1))  # naive
    assert info.value.field == "initial"
    with pytest.raises(ConfigError) as info:
        WatermarkConfig(type="integer", overlap=timedelta(1))
    assert info.value.field == "overlap"
    with pytest.raises(ConfigError) as info:
        WatermarkConfig(max_window=timedelta(0))
    assert info.value.field == "max_window"


# --- properties -----------------------------------------------------------------

aware_times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)
seconds = st.integers(min_value=1, max_value=10 * 24 * 3600).map(lambda s: timedelta(seconds=s))


@settings(deadline=None)
@given(
    initial=aware_times,
    gap=seconds,
    max_window=st.none() | seconds,
    lag=st.integers(0, 3600).map(lambda s: timedelta(seconds=s)),
    overlap=st.integers(0, 3600).map(lambda s: timedelta(seconds=s)),
)
def test_datetime_windows_never_leave_a_gap_and_never_move_backwards(initial, gap, max_window, lag, overlap):
    config = dt_config(initial=initial, lag=lag, overlap=overlap, max_window=max_window)
    now = initial + gap
    state = WatermarkState(None)
    mark = initial
    windows = compute_windows(config, state, now, limit=500)
    for window in windows:
        assert window.low == mark - overlap  # contiguous in terms of the mark
        assert window.high > mark
        if max_window is not None:
            assert window.high - mark <= max_window
        assert window.high <= now - lag
        state = advance(config, state, window, None)
        assert state.value == window.high
        mark = window.high
    if len(windows) < 500:
        # Everything readable was covered.
        assert mark >= now - lag or not windows and initial >= now - lag
        assert compute_window(config, state, now) is None


@settings(deadline=None)
@given(
    initial=st.integers(-1000, 1000),
    overlap=st.integers(0, 50),
    max_window=st.none() | st.integers(1, 500),
    loads=st.lists(st.none() | st.integers(-2000, 5000), max_size=20),
)
def test_integer_windows_never_leave_a_gap_and_never_move_backwards(initial, overlap, max_window, loads):
    config = int_config(initial=initial, overlap=overlap, max_window=max_window)
    state = WatermarkState(None)
    mark = initial
    for loaded in loads:
        window = compute_window(config, state, NOW)
        assert window is not None
        assert window.low == mark - overlap <= mark
        if loaded is not None and window.high is not None:
            loaded = min(loaded, window.high)  # a source never returns rows above high
        new = advance(config, state, window, loaded)
        new_mark = new.value if new.value is not None else initial
        assert new_mark >= mark
        if loaded is not None and loaded > mark:
            assert new_mark == loaded
        state, mark = new, new_mark


@settings(deadline=None)
@given(
    start=st.integers(-10_000, 10_000),
    length=st.integers(1, 10_000),
    size=st.integers(1, 3_000),
)
def test_split_integer_windows_are_contiguous_and_cover_exactly(start, length, size):
    end = start + length
    windows = split_windows(start, end, size)
    assert windows[0][0] == start and windows[-1][1] == end
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))
    assert all(0 < high - low <= size for low, high in windows)
    assert len(windows) == -(-length // size)


@settings(deadline=None)
@given(start=aware_times, length=seconds, size_seconds=st.integers(1, 10 * 24 * 3600))
def test_split_datetime_windows_are_contiguous_and_cover_exactly(start, length, size_seconds):
    # Keep the window count modest; the speed test below covers big splits.
    size = max(timedelta(seconds=size_seconds), length / 2000)
    windows = split_windows(start, start + length, size)
    assert windows[0][0] == start and windows[-1][1] == start + length
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))
    assert all(timedelta(0) < high - low <= size for low, high in windows)


def test_split_windows_clips_the_last_window():
    assert split_windows(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]


@pytest.mark.parametrize(
    "args, field, message",
    [
        ((NOW, NOW, H), "from", "from must be before to"),
        ((NOW, NOW - H, H), "from", "from must be before to"),
        ((NOW, NOW + H, timedelta(0)), "window", "window"),
        ((0, 10, -1), "window", "window"),
        ((0, 10, 3, 2), "window", "4 windows"),
    ],
)
def test_split_windows_refuses_bad_ranges(args, field, message):
    with pytest.raises(ConfigError) as info:
        split_windows(*args)
    assert info.value.field == field
    assert message in str(info.value)


def test_a_decade_of_hourly_windows_is_contiguous():
    # speed is measured in bench/ (scenario 6), not asserted here
    start = datetime(2015, 1, 1, tzinfo=UTC)
    windows = split_windows(start, start + timedelta(hours=87_600), H)
    assert len(windows) == 87_600
    assert windows[0][0] == start and windows[-1][1] == start + timedelta(hours=87_600)
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:]))


@pytest.mark.parametrize("name, value", [("initial", 2**63), ("initial", -(2**63) - 1), ("overlap", 2**63),
                                         ("max_window", 2**63)])
def test_an_integer_setting_beyond_64_bits_is_refused_naming_it(name, value):
    with pytest.raises(ConfigError, match=f"watermark.{name}: is outside the 64-bit integer range"):
        WatermarkConfig.from_dict({"type": "integer", name: value})


def test_the_64_bit_edges_are_accepted():
    config = WatermarkConfig.from_dict({"type": "integer", "initial": -(2**63), "max_window": 2**63 - 1})
    assert (config.initial, config.max_window) == (-(2**63), 2**63 - 1)


# --- windows on the calendar ----------------------------------------------------------


def test_a_datetime_window_includes_low_and_excludes_high():
    day = Window(datetime(2013, 3, 1, tzinfo=UTC), datetime(2013, 3, 2, tzinfo=UTC))
    assert day.contains(datetime(2013, 3, 1, tzinfo=UTC))
    assert day.contains(datetime(2013, 3, 1, 23, 59, 59, 999999, tzinfo=UTC))
    assert not day.contains(datetime(2013, 3, 2, tzinfo=UTC))
    assert not day.contains(datetime(2013, 2, 28, 23, 59, 59, 999999, tzinfo=UTC))
    assert day.operators == (">=", "<")
    assert str(day) == "[2013-03-01T00:00:00+00:00, 2013-03-02T00:00:00+00:00)"


def test_an_integer_window_keeps_greater_than_the_largest_loaded():
    ids = Window(10, 20)
    assert [v for v in (9, 10, 11, 20, 21) if ids.contains(v)] == [11, 20]
    assert ids.operators == (">", "<=")
    assert str(ids) == "(10, 20]" and Window(10, None).contains(10**12)


def test_consecutive_live_windows_read_every_instant_exactly_once():
    config = dt_config(initial=datetime(2013, 3, 1, tzinfo=UTC), max_window=timedelta(days=1))
    windows = compute_windows(config, WatermarkState(None), datetime(2013, 4, 1, tzinfo=UTC))
    hourly = [datetime(2013, 2, 28, tzinfo=UTC) + H * i for i in range(24 * 33)]
    loaded = [t for t in hourly for w in windows if w.contains(t)]
    assert len(windows) == 31
    assert loaded == [t for t in hourly if t.month == 3]  # exactly March, each hour once


def test_until_bounds_a_datetime_watermark_and_then_nothing_more_is_read():
    until = datetime(2013, 4, 1, tzinfo=UTC)
    config = dt_config(initial=datetime(2013, 3, 1, tzinfo=UTC), max_window=timedelta(days=7), until=until)
    windows = compute_windows(config, WatermarkState(None), NOW)
    assert windows[-1].high == until and len(windows) == 5
    assert compute_window(config, WatermarkState(until), NOW) is None
    assert reached_until(config, WatermarkState(until)) and not reached_until(config, WatermarkState(None))


def test_until_bounds_an_integer_watermark_inclusively():
    config = int_config(initial=100, until=150)
    assert compute_window(config, WatermarkState(None), NOW) == Window(100, 150)
    assert compute_window(int_config(initial=100, max_window=20, until=150), WatermarkState(140), NOW) == Window(
        140, 150
    )
    assert compute_window(config, WatermarkState(150), NOW) is None


def test_until_round_trips_and_bad_values_name_the_field():
    config = WatermarkConfig.from_dict({"type": "datetime", "initial": "2013-03-01T00:00:00+00:00",
                                        "until": "2013-04-01T00:00:00+00:00"})
    assert config.until == datetime(2013, 4, 1, tzinfo=UTC)
    assert WatermarkConfig.from_dict(config.to_dict()) == config
    for data in ({"until": "soon"}, {"initial": "2013-04-01T00:00:00Z", "until": "2013-03-01T00:00:00Z"},
                 {"type": "integer", "until": "12"}, {"type": "integer", "initial": 5, "until": 5}):
        with pytest.raises(ConfigError) as info:
            WatermarkConfig.from_dict(data)
        assert info.value.field == "until", data
