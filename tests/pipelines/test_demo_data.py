import hashlib
import sqlite3
import time
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core import ConfigError
from scheduler.pipelines.demo_data import append_new_rows, create_warehouse_db, generate_source_db
from scheduler.pipelines.values import iso_utc, parse_datetime

NOW = datetime(2024, 5, 1, 12, tzinfo=UTC)


def dump(path):
    conn = sqlite3.connect(path)
    digest = hashlib.sha256()
    for line in conn.iterdump():
        digest.update(line.encode())
    conn.close()
    return digest.hexdigest()


@pytest.fixture(scope="module")
def source_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "source.db"
    started = time.perf_counter()
    generate_source_db(path, now=NOW)
    return path, time.perf_counter() - started


def test_demo_data_is_deterministic_and_has_100k_rows(source_db, tmp_path):
    path, _ = source_db
    conn = sqlite3.connect(path)
    customers = conn.execute("SELECT COUNT(*) FROM customers").fetchone()[0]
    orders = conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    assert (customers, orders) == (20_000, 100_000)
    again = generate_source_db(tmp_path / "again.db", now=NOW)
    assert dump(again) == dump(path)
    other = generate_source_db(tmp_path / "other.db", now=NOW, seed=7, customers=10, orders=10)
    assert dump(other) != dump(generate_source_db(tmp_path / "small.db", now=NOW, customers=10, orders=10))


def test_demo_data_looks_realistic(source_db):
    conn = sqlite3.connect(source_db[0])
    statuses = {s for (s,) in conn.execute("SELECT DISTINCT status FROM orders")}
    assert statuses == {"pending", "confirmed", "shipped", "cancelled"}
    low, high = conn.execute("SELECT MIN(last_modified), MAX(last_modified) FROM orders").fetchone()
    assert NOW - timedelta(days=30) <= parse_datetime(low) < parse_datetime(high) <= NOW
    assert conn.execute("SELECT COUNT(*) FROM orders WHERE created_at > last_modified").fetchone() == (0,)
    assert conn.execute(
        "SELECT COUNT(*) FROM orders o LEFT JOIN customers c ON c.id = o.customer_id WHERE c.id IS NULL"
    ).fetchone() == (0,)
    name, email, country = conn.execute("SELECT name, email, country FROM customers WHERE id = 1").fetchone()
    assert " " in name and "@" in email and len(country) == 2
    # Stored in the canonical form SqlSource's windows compare against.
    (stamp,) = conn.execute("SELECT last_modified FROM customers WHERE id = 1").fetchone()
    assert stamp == iso_utc(parse_datetime(stamp))


def test_generate_source_db_leaves_an_existing_file_alone_unless_forced(tmp_path):
    path = generate_source_db(tmp_path / "s.db", now=NOW, customers=5, orders=5)
    before = dump(path)
    generate_source_db(path, now=NOW + timedelta(days=1), customers=5, orders=5)
    assert dump(path) == before
    generate_source_db(path, now=NOW + timedelta(days=1), customers=5, orders=5, force=True)
    assert dump(path) != before


def test_append_new_rows_adds_fresh_rows_an_hourly_sync_will_find(tmp_path):
    path = generate_source_db(tmp_path / "s.db", now=NOW, customers=50, orders=200)
    later = NOW + timedelta(hours=1)
    counts = append_new_rows(path, now=later, n=20, seed=1)
    assert counts["inserted"] == 20 and counts["updated_orders"] >= 1 and counts["updated_customers"] >= 1
    conn = sqlite3.connect(path)
    fresh_orders = conn.execute("SELECT COUNT(*) FROM orders WHERE last_modified > ?", (iso_utc(NOW),)).fetchone()[0]
    assert fresh_orders == counts["inserted"] + counts["updated_orders"]
    assert conn.execute("SELECT MAX(last_modified) FROM orders").fetchone()[0] <= iso_utc(later)
    assert conn.execute("SELECT COUNT(*) FROM orders").fetchone() == (220,)


def test_append_new_rows_refuses_a_missing_database(tmp_path):
    with pytest.raises(ConfigError) as err:
        append_new_rows(tmp_path / "none.db", now=NOW)
    assert err.value.field == "path"


def test_generate_source_db_refuses_bad_counts(tmp_path):
    with pytest.raises(ConfigError) as err:
        generate_source_db(tmp_path / "x.db", orders=-1)
    assert err.value.field == "orders"
    assert not (tmp_path / "x.db").exists()


def test_create_warehouse_db_is_idempotent_and_has_the_demo_tables(tmp_path):
    path = create_warehouse_db(tmp_path / "wh.db")
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO dim_customers (id, name) VALUES (1, 'a')")
    conn.commit()
    create_warehouse_db(path)
    assert conn.execute("SELECT COUNT(*) FROM dim_customers").fetchone() == (1,)
    tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"dim_customers", "fact_orders", "revenue_by_country", "confirmed_orders", "webhook_records"} <= tables
    conn.close()
    create_warehouse_db(path, force=True)
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM dim_customers").fetchone() == (0,)
