"""What a cluster's loops run: executing runs, the heartbeat pump, the governance loop."""
from scheduler.services.cluster.batch import execute_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.cluster.heartbeats import HeartbeatPump
from scheduler.services.cluster.governance import governance_tick

__all__ = [
    "execute_run", "execute_runs", "HeartbeatPump", "governance_tick"
]
