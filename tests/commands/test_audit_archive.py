"""`audit_archive show FILE`: an archive written by the prune reads back; a bad file is refused by name."""
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from scheduler.models import AuditEntry
from scheduler.services.common.audit import audit_record

pytestmark = pytest.mark.django_db


def test_prune_archives_old_entries_and_show_reads_them_back(settings, tmp_path):
    settings.ETL_AUDIT_ARCHIVE_DIR = str(tmp_path)
    at = timezone.now() - timedelta(days=400)
    entry = audit_record(actor="ann", action="schedule.update", target=("schedule", 7), at=at, reason="tidy")
    call_command("prune_history", stdout=StringIO(), stderr=StringIO())
    assert not AuditEntry.objects.filter(pk=entry.pk).exists()
    path = tmp_path / f"audit-{at:%Y-%m}.jsonl.gz"
    out = StringIO()
    call_command("audit_archive", "show", str(path), stdout=out)
    assert f"#{entry.pk}  ann  schedule.update  schedule:7  (tidy)" in out.getvalue()
    assert "1 entries" in out.getvalue()
    out = StringIO()
    call_command("audit_archive", "show", str(path), "--json", stdout=out)
    assert json.loads(out.getvalue().splitlines()[0])["id"] == entry.pk


@pytest.mark.parametrize("content, message", [(None, "no such file"), (b"plain text", "not a gzip archive")])
def test_a_missing_or_bad_file_exits_2_naming_it(tmp_path, content, message):
    path = tmp_path / "audit-2025-01.jsonl.gz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CommandError) as info:
        call_command("audit_archive", "show", str(path), stdout=StringIO())
    assert info.value.returncode == 2 and str(path) in str(info.value) and message in str(info.value)
