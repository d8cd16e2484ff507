"""Shared low pieces every service uses: errors, the audit log, compare-and-set helpers, leases, outgoing address
checks, webhook signatures.
"""
from scheduler.services.common.errors import ServiceError, InvalidInput, NotFound, ErrorCollector, check_text
from scheduler.services.common.audit import audit_record, audit_refusal, actor_name
from scheduler.services.common.leases import lease_acquire, lease_release

__all__ = [
    "ServiceError", "InvalidInput", "NotFound", "ErrorCollector", "check_text", "audit_record", "audit_refusal",
    "actor_name", "lease_acquire", "lease_release"
]
