"""Airflow: a DAG of N no-op PythonOperator tasks as a chain or a fan-out, run by dag.test().

Usage: airflow_wf.py chain|fanout N   (AIRFLOW_HOME points into the scratch folder, `airflow db migrate` done)
"""
import sys
import time
import uuid
from datetime import datetime

from airflow import DAG
from airflow.operators.python import PythonOperator

SHAPE, N = sys.argv[1], int(sys.argv[2])


def noop() -> None:
    return None


if __name__ == "__main__":
    t0 = time.perf_counter()
    dag_id = f"bench_{SHAPE}_{N}_{uuid.uuid4().hex[:6]}"
    with DAG(dag_id, start_date=datetime(2024, 1, 1), schedule=None, catchup=False) as dag:
        tasks = [PythonOperator(task_id=f"t{i}", python_callable=noop) for i in range(N)]
        for i in range(1, N):
            (tasks[i - 1] if SHAPE == "chain" else tasks[0]) >> tasks[i]
    run = dag.test()
    elapsed = time.perf_counter() - t0
    states = [ti.state for ti in run.get_task_instances()]
    assert str(run.state) == "success" and states.count("success") == N, (run.state, states)
    print(f"ok {states.count('success')} {elapsed:.6f}")
