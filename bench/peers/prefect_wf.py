"""Prefect: a flow of N no-op tasks as a chain or a fan-out (wait_for), on its temporary local server.

Usage: prefect_wf.py chain|fanout N   (PREFECT_HOME points into the scratch folder)
"""
import sys
import time

from prefect import flow, task

SHAPE, N = sys.argv[1], int(sys.argv[2])


@task
def noop() -> int:
    return 1


@flow
def workflow() -> int:
    root = noop.submit()
    futures = [root]
    for i in range(1, N):
        upstream = futures[-1] if SHAPE == "chain" else root
        futures.append(noop.submit(wait_for=[upstream]))
    return sum(f.result() for f in futures)


if __name__ == "__main__":
    t0 = time.perf_counter()
    ran = workflow()
    elapsed = time.perf_counter() - t0
    assert ran == N, ran
    print(f"ok {ran} {elapsed:.6f}")
