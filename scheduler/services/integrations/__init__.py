"""The outside world: the OpenLineage outbox and its sender, notification channels (Apprise URLs)."""
from scheduler.services.integrations.lineage import lineage_enabled, lineage_run_began, lineage_run_ended
from scheduler.services.integrations.lineage_send import lineage_tick, lineage_drain
from scheduler.services.integrations.channels import check_channels, send_channel, mask_url

__all__ = [
    "lineage_enabled", "lineage_run_began", "lineage_run_ended", "lineage_tick", "lineage_drain", "check_channels",
    "send_channel", "mask_url"
]
