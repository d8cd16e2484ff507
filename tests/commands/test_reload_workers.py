"""`reload_workers [--cluster NAME] [--reason TEXT] [--json]`: ask the running clusters to roll out new code
(a real cluster acting on it: tests/integration/test_rollout.py)."""
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from scheduler.models import AuditEntry, Cluster

pytestmark = pytest.mark.django_db


def _cluster(holder: str, *, seen) -> Cluster:
    return Cluster.objects.create(holder=holder, name=holder.split("@")[0], host="h1", pid=7, started_at=seen,
                                  seen_at=seen, code_version="team-etl 1.0.0 · 0123456789ab")


def test_it_asks_every_running_cluster_and_audits_each():
    now = timezone.now()
    _cluster("c1@h1:7:a", seen=now)
    _cluster("c2@h1:8:b", seen=now)
    _cluster("gone@h1:9:c", seen=now - timedelta(hours=1))
    out = StringIO()
    call_command("reload_workers", "--reason", "sales-etl 0.2.0", "--actor", "olivia", stdout=out)
    asked = dict(Cluster.objects.values_list("holder", "reload_reason"))
    assert asked == {"c1@h1:7:a": "sales-etl 0.2.0", "c2@h1:8:b": "sales-etl 0.2.0", "gone@h1:9:c": ""}
    assert out.getvalue().count("to restart its workers once its running runs end") == 2
    entries = AuditEntry.objects.filter(action="cluster.reload").order_by("target_id")
    assert [(e.actor, e.target_id, e.reason) for e in entries] == [("olivia", "c1", "sales-etl 0.2.0"),
                                                                   ("olivia", "c2", "sales-etl 0.2.0")]


def test_one_cluster_by_name_and_json():
    now = timezone.now()
    _cluster("c1@h1:7:a", seen=now)
    _cluster("c2@h1:8:b", seen=now)
    out = StringIO()
    call_command("reload_workers", "--cluster", "c2", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"asked": [{"cluster": "c2", "holder": "c2@h1:8:b", "host": "h1",
                                                     "code_version": "team-etl 1.0.0 · 0123456789ab"}]}
    assert list(Cluster.objects.filter(reload_requested_at__isnull=False).values_list("name", flat=True)) == ["c2"]


def test_an_unknown_cluster_exits_2_and_asks_none():
    _cluster("c1@h1:7:a", seen=timezone.now())
    with pytest.raises(CommandError) as info:
        call_command("reload_workers", "--cluster", "c9")
    assert info.value.returncode == 2 and str(info.value) == "--cluster: no running cluster is named 'c9'"
    assert not Cluster.objects.filter(reload_requested_at__isnull=False).exists()
    assert not AuditEntry.objects.filter(action="cluster.reload").exists()


def test_with_no_cluster_running_it_says_so():
    out = StringIO()
    call_command("reload_workers", stdout=out)
    assert out.getvalue().startswith("no cluster is running")
