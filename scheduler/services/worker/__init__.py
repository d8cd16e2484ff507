"""How a target's code runs: a pipeline or workflow, a command, a dbt build, each under the supervisor that stops and
reaps its processes.
"""
from scheduler.services.worker.targets import run_target
from scheduler.services.worker.commands import command_execute, command_spec_check
from scheduler.services.worker.dbt import dbt_execute, dbt_spec_check
from scheduler.services.worker.supervisor import RunControl, kill_run_processes

__all__ = [
    "run_target", "command_execute", "command_spec_check", "dbt_execute", "dbt_spec_check", "RunControl",
    "kill_run_processes"
]
