"""A demo source database (customers, orders) and an empty warehouse, in SQLite.

Timestamps are stored as canonical ISO-8601 UTC text (`values.iso_utc`),
so SqlSource's window filters compare them correctly as text and can use
the `last_modified` indexes.
"""

from __future__ import annotations

import os
import random
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scheduler.core import ConfigError

from .values import iso_utc, to_utc

FIRST_NAMES = (
    "Ada",
    "Alan",
    "Amara",
    "Ben",
    "Carla",
    "Chen",
    "Dara",
    "Diego",
    "Elena",
    "Emeka",
    "Fatima",
    "Felix",
    "Grace",
    "Hana",
    "Ivan",
    "Jonas",
    "Kenji",
    "Lena",
    "Lucia",
    "Malik",
    "Maya",
    "Nadia",
    "Noah",
    "Olga",
    "Omar",
    "Priya",
    "Rafael",
    "Sara",
    "Tomas",
    "Yara",
)
LAST_NAMES = (
    "Adams",
    "Berg",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jansen",
    "Kowalski",
    "Lopez",
    "Mensah",
    "Novak",
    "Okafor",
    "Patel",
    "Quinn",
    "Rossi",
    "Silva",
    "Tanaka",
    "Usman",
    "Varga",
    "Weber",
    "Xu",
    "Yilmaz",
    "Zhang",
)
DOMAINS = ("example.com", "example.org", "mail.example.net", "shop.example")
# (country, currency, weight): a skewed mix, as real customer bases are.
COUNTRIES = (
    ("US", "USD", 30),
    ("DE", "EUR", 14),
    ("GB", "GBP", 12),
    ("FR", "EUR", 10),
    ("NL", "EUR", 6),
    ("ES", "EUR", 6),
    ("JP", "JPY", 7),
    ("BR", "BRL", 5),
    ("IN", "INR", 5),
    ("CA", "CAD", 5),
)
STATUSES = ("pending", "confirmed", "shipped", "cancelled")
STATUS_WEIGHTS = (10, 25, 55, 10)
NEXT_STATUS = {"pending": "confirmed", "confirmed": "shipped"}

SOURCE_SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    country TEXT NOT NULL,
    last_modified TEXT NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    status TEXT NOT NULL,
    amount REAL NOT NULL,
    currency TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_modified TEXT NOT NULL
);
CREATE INDEX customers_last_modified ON customers (last_modified);
CREATE INDEX orders_last_modified ON orders (last_modified);
"""

WAREHOUSE_SCHEMA = """
CREATE TABLE IF NOT EXISTS dim_customers (
    id INTEGER PRIMARY KEY, name TEXT, email TEXT, country TEXT, last_modified TEXT
);
CREATE TABLE IF NOT EXISTS fact_orders (
    id INTEGER PRIMARY KEY, customer_id INTEGER, status TEXT, amount REAL, currency TEXT,
    created_at TEXT, last_modified TEXT
);
CREATE TABLE IF NOT EXISTS revenue_by_country (
    country TEXT, currency TEXT, day TEXT, amount REAL, orders INTEGER,
    PRIMARY KEY (country, currency, day)
);
CREATE TABLE IF NOT EXISTS confirmed_orders (
    order_id INTEGER PRIMARY KEY, status TEXT, confirmed_at TEXT, run_id INTEGER
);
CREATE TABLE IF NOT EXISTS webhook_records (
    id TEXT PRIMARY KEY, payload TEXT, received_at TEXT, run_id INTEGER
);
"""

SPREAD = timedelta(days=30)


_TICK = timedelta(microseconds=1)


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC).replace(microsecond=0)
    if not isinstance(now, datetime):
        raise ConfigError("now", f"must be a datetime, got {now!r}")
    return to_utc(now)


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, timeout=30, isolation_level=None)


def _customer(rng: random.Random, cid: int, when: datetime) -> tuple[Any, ...]:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    email = f"{first}.{last}{cid}@{rng.choice(DOMAINS)}".lower()
    country = rng.choices(COUNTRIES, weights=[c[2] for c in COUNTRIES])[0][0]
    return (cid, f"{first} {last}", email, country, iso_utc(when))


def _amount(rng: random.Random, currency: str) -> float:
    # Log-normal order values; yen and rupees are scaled to look plausible.
    scale = {"JPY": 150, "INR": 80}.get(currency, 1)
    return round(rng.lognormvariate(3.8, 0.7) * scale, 0 if currency == "JPY" else 2)


def generate_source_db(
    path: str | os.PathLike,
    *,
    customers: int = 20_000,
    orders: int = 100_000,
    seed: int = 42,
    now: datetime | None = None,
    force: bool = False,
) -> Path:
    """Create the demo source database at `path` unless it exists (or `force`).

    The same seed and `now` give the same file content. Written to a
    temporary file first, so a crash never leaves half a database behind.
    """
    path = Path(path)
    if path.exists() and not force:
        return path
    for name, value in (("customers", customers), ("orders", orders)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(name, "must be a non-negative integer")
    if orders and not customers:
        raise ConfigError("customers", "orders need at least one customer")
    now = _now(now)
    rng = random.Random(seed)
    start = now - SPREAD
    span = SPREAD.total_seconds()

    country_of: list[str] = []
    customer_rows = []
    for cid in range(1, customers + 1):
        row = _customer(rng, cid, start + timedelta(seconds=rng.uniform(0, span)))
        customer_rows.append(row)
        country_of.append(row[3])
    currency_by_country = {c[0]: c[1] for c in COUNTRIES}

    order_rows = []
    for oid in range(1, orders + 1):
        customer_id = rng.randint(1, customers)
        currency = currency_by_country[country_of[customer_id - 1]]
        created = start + timedelta(seconds=rng.uniform(0, span))
        # Most orders change again within days (confirmed, shipped), always before now:
        # a live window [mark, now) reads everything that happened before now.
        modified = min(now - _TICK, created + timedelta(seconds=rng.expovariate(1 / 86_400)))
        status = rng.choices(STATUSES, weights=STATUS_WEIGHTS)[0]
        order_rows.append(
            (oid, customer_id, status, _amount(rng, currency), currency, iso_utc(created), iso_utc(modified))
        )

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    conn = _connect(tmp)
    try:
        conn.execute("PRAGMA journal_mode = OFF")  # a throwaway file until the rename
        conn.execute("BEGIN")
        for statement in SOURCE_SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?)", customer_rows)
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)", order_rows)
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode = WAL")  # readers and append_new_rows run side by side
    except BaseException:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise
    conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(tmp, path)
    return path


def append_new_rows(path: str | os.PathLike, *, now: datetime, n: int = 50, seed: int | None = None) -> dict[str, int]:
    """Insert about `n` new orders and touch a few existing rows, all modified just before `now`.

    Gives an hourly sync fresh data to find. Returns counts of what changed.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError("path", f"no demo source database at {path}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError("n", "must be a non-negative integer")
    now = _now(now)
    rng = random.Random(seed)

    def recent() -> str:
        return iso_utc(now - timedelta(seconds=rng.uniform(0, 60)))

    conn = _connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        max_order, customers = conn.execute(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM orders), (SELECT COUNT(*) FROM customers)"
        ).fetchone()
        currency_by_country = {c[0]: c[1] for c in COUNTRIES}
        new_orders = []
        if customers:
            for i in range(n):
                customer_id = rng.randint(1, customers)
                (country,) = conn.execute("SELECT country FROM customers WHERE id = ?", (customer_id,)).fetchone()
                currency = currency_by_country.get(country, "USD")
                stamp = recent()
                new_orders.append(
                    (max_order + i + 1, customer_id, "pending", _amount(rng, currency), currency, stamp, stamp)
                )
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)", new_orders)
        # Move some open orders one step along their life cycle.
        open_orders = conn.execute(
            "SELECT id, status FROM orders WHERE status IN ('pending', 'confirmed') AND id <= ? "
            "ORDER BY last_modified DESC LIMIT ?",
            (max_order, max(1, n // 5)),
        ).fetchall()
        conn.executemany(
            "UPDATE orders SET status = ?, last_modified = ? WHERE id = ?",
            [(NEXT_STATUS[status], recent(), oid) for oid, status in open_orders],
        )
        touched = rng.sample(range(1, customers + 1), min(customers, max(1, n // 10))) if customers else []
        conn.executemany(
            "UPDATE customers SET email = ?, last_modified = ? WHERE id = ?",
            [(f"customer{cid}.{rng.randrange(10**6)}@{rng.choice(DOMAINS)}", recent(), cid) for cid in touched],
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()
    return {"inserted": len(new_orders), "updated_orders": len(open_orders), "updated_customers": len(touched)}


def create_warehouse_db(path: str | os.PathLike, *, force: bool = False) -> Path:
    """An empty SQLite warehouse with the demo tables; safe to call again."""
    path = Path(path)
    if force:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = _connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(WAREHOUSE_SCHEMA)
    finally:
        conn.close()
    return path
