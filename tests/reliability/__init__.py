"""Fault tests: real clusters killed, restarted, cut off."""

# How quickly a killed worker's run is called lost, for the tests that kill one. Governance may give a run away 5 s
# after its last beat; its worker, beating every 0.5 s, stops its own code 3 s after its last good beat (the fence).
# Two seconds of margin: a worker starved of the CPU for a second or two (both test passes on two cores) is neither
# fenced nor given away. At 2 s to lost (1 s to the fence), a 1000-node workflow was fenced in the middle under load
# and its next attempt, which does not stall, never gave the test its worker to kill (CI, session 11).
LOST_AFTER_A_KILL = {
    "ETL_STUCK_SECONDS": "5", "ETL_FENCE_SECONDS": "3", "ETL_HEARTBEAT_SECONDS": "0.5",
    "ETL_GOVERNANCE_INTERVAL": "0.5",
}
