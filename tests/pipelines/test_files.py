import csv
import json
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core import ConfigError, EtlError, Window
from scheduler.pipelines.files import CsvSink, FileSource

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def write_csv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_file_source_reads_csv_rows_as_dicts(tmp_path):
    path = tmp_path / "in.csv"
    write_csv(path, [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])
    assert list(FileSource(path).extract()) == [{"id": "1", "name": "a"}, {"id": "2", "name": "b"}]


def test_file_source_filters_csv_by_an_integer_window_comparing_numbers(tmp_path):
    path = tmp_path / "in.csv"
    # As text "10" < "9"; as integers the window (8, 10] holds 9 and 10.
    write_csv(path, [{"seq": n} for n in (8, 9, 10, 11)])
    source = FileSource(path, watermark_column="seq", window=Window(8, 10))
    assert [r["seq"] for r in source.extract()] == ["9", "10"]


def test_file_source_filters_jsonl_by_a_datetime_window_across_zones(tmp_path):
    path = tmp_path / "in.jsonl"
    lines = [
        {"id": 1, "at": "2024-05-01T01:00:00Z"},
        {"id": 2, "at": "2024-05-01T04:00:00+02:00"},  # 02:00 UTC
        {"id": 3, "at": "2024-05-01T03:00:00"},  # naive: taken as UTC
        {"id": 4, "at": None},  # outside every window
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    source = FileSource(path, watermark_column="at", window=Window(T0 + timedelta(hours=1), T0 + timedelta(hours=3)))
    # [01:00, 03:00): the row at 03:00 belongs to the next window
    assert [r["id"] for r in source.extract()] == [1, 2]


def test_file_source_reports_the_line_of_a_bad_value(tmp_path):
    path = tmp_path / "in.csv"
    write_csv(path, [{"seq": 1}, {"seq": "x"}])
    with pytest.raises(EtlError, match=r"in.csv:3: seq"):
        list(FileSource(path, watermark_column="seq", window=Window(0, 5)).extract())


def test_file_source_reports_the_line_of_bad_json(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1}\n{oops\n')
    with pytest.raises(EtlError, match=r"in.jsonl:2: not JSON"):
        list(FileSource(path).extract())


def test_file_source_missing_file_is_an_etl_error(tmp_path):
    with pytest.raises(EtlError, match="cannot read"):
        list(FileSource(tmp_path / "missing.csv").extract())


@pytest.mark.parametrize(
    "path, kwargs, field",
    [
        ("in.txt", {}, "format"),
        ("in.csv", {"format": "xml"}, "format"),
        ("in.csv", {"window": Window(1, 2)}, "watermark_column"),
        ("", {}, "path"),
    ],
)
def test_file_source_refuses_bad_configuration_naming_the_field(path, kwargs, field):
    with pytest.raises(ConfigError) as err:
        FileSource(path, **kwargs)
    assert err.value.field == field


def test_csv_sink_writes_the_header_once_when_appending(tmp_path):
    path = tmp_path / "out" / "report.csv"
    sink = CsvSink(path)
    assert sink.load([{"id": 1, "at": T0}]) == 1
    assert sink.load([{"id": 2, "at": None}, {"id": 3}]) == 2
    assert path.read_text().splitlines() == ["id,at", "1,2024-05-01T00:00:00.000000+00:00", "2,", "3,"]


def test_csv_sink_refuses_columns_the_file_does_not_have(tmp_path):
    path = tmp_path / "report.csv"
    CsvSink(path).load([{"id": 1}])
    with pytest.raises(EtlError, match="extra"):
        CsvSink(path).load([{"id": 2, "extra": 1}])
    assert path.read_text().splitlines() == ["id", "1"]


def test_csv_sink_without_append_replaces_the_file(tmp_path):
    path = tmp_path / "report.csv"
    sink = CsvSink(path, columns=["id", "v"], append=False)
    sink.load([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
    assert sink.load([{"id": 3, "v": "c"}]) == 1
    assert path.read_text().splitlines() == ["id,v", "3,c"]
    assert sink.load([]) == 0
    assert path.read_text().splitlines() == ["id,v"]
    assert [p.name for p in tmp_path.iterdir()] == ["report.csv"]  # no temporary files left


def test_csv_sink_round_trips_through_file_source(tmp_path):
    path = tmp_path / "data.csv"
    CsvSink(path).load([{"id": 1, "name": 'x,y "quoted"'}])
    assert list(FileSource(path).extract()) == [{"id": "1", "name": 'x,y "quoted"'}]


def test_csv_sink_refuses_bad_columns():
    with pytest.raises(ConfigError) as err:
        CsvSink("x.csv", columns=["a", "a"])
    assert err.value.field == "columns"
