"""The box `serve` prints the demo logins in (issue 23, point 10)."""
from scheduler.management.commands.serve import logins_box


def test_the_box_shows_each_login_on_its_own_line_and_fits_a_terminal():
    text = ("login: operator / pw-1   (team ingest: runs, re-runs, cancels, backfills, breakers, watermarks and "
            "acknowledging failures of its schedules; analytics: view only; no admin; shown once, save it now)\n"
            "admin login: admin / pw-2   (every team; shown once, save it now)\n")
    box = logins_box(text, path="/srv/etl/var/demo-logins.txt", url="http://127.0.0.1:8000/")
    lines = box.splitlines()
    assert lines[0].startswith("+=") and lines[-1] == lines[0]
    assert all(len(line) == len(lines[0]) <= 82 for line in lines)
    assert "| login: operator / pw-1 " in box and "| admin login: admin / pw-2 " in box
    assert "/srv/etl/var/demo-logins.txt" in box and "http://127.0.0.1:8000/" in box
