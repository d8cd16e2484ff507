"""The overview shows each running cluster's code and warns when they do not run the same code (issue 32)."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler.models import Cluster

pytestmark = pytest.mark.django_db
URL = reverse("scheduler:overview")


def _cluster(holder: str, code: str, *, seen, **fields) -> Cluster:
    return Cluster.objects.create(holder=holder, name=holder.split("@")[0], host="m1", pid=40, started_at=seen,
                                  seen_at=seen, code_version=code, **fields)


def test_each_cluster_shows_its_code_and_agreeing_clusters_raise_no_warning(viewer_client):
    now = timezone.now()
    _cluster("c1@m1:40:a", "sales-etl 0.2.0, etl-scheduler 0.1.0 · 9f86d081884c", seen=now)
    _cluster("c2@m2:41:b", "sales-etl 0.2.0, etl-scheduler 0.1.0 · 9f86d081884c", seen=now)
    _cluster("old@m3:42:c", "sales-etl 0.1.0, etl-scheduler 0.1.0 · 0000aaaa1111", seen=now - timedelta(hours=2))
    page = viewer_client.get(URL).content.decode()
    assert page.count("sales-etl 0.2.0, etl-scheduler 0.1.0 · 9f86d081884c") == 2
    assert "0000aaaa1111" not in page, "a cluster gone is not shown"
    assert 'id="clusters-disagree"' not in page


def test_clusters_on_different_code_are_warned_about(viewer_client):
    now = timezone.now()
    _cluster("c1@m1:40:a", "sales-etl 0.2.0 · 9f86d081884c", seen=now)
    _cluster("c2@m2:41:b", "sales-etl 0.1.0 · 0000aaaa1111", seen=now, draining_since=now,
             reload_reason="newer code installed: sales-etl 0.1.0 -> 0.2.0", problems=["broken-etl: ImportError: x"])
    page = viewer_client.get(URL).content.decode()
    assert 'id="clusters-disagree"' in page and "(2 clusters, 2 versions)" in page
    assert "restarting its workers once its runs end: newer code installed: sales-etl 0.1.0 -&gt; 0.2.0" in page
    assert "broken-etl: ImportError: x" in page


def test_no_cluster_says_so(viewer_client):
    assert "No cluster has beaten in the last 30 s" in viewer_client.get(URL).content.decode()
