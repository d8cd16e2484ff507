"""Luigi: N no-op tasks as a chain or a fan-out, local scheduler. Usage: luigi_wf.py chain|fanout N"""
import sys
import time

import luigi

SHAPE, N = sys.argv[1], int(sys.argv[2])
DONE: set[int] = set()


class Noop(luigi.Task):
    i = luigi.IntParameter()

    def requires(self):
        if self.i == 0:
            return []
        return [Noop(i=self.i - 1)] if SHAPE == "chain" else [Noop(i=0)]

    def complete(self):
        return self.i in DONE

    def run(self):
        DONE.add(self.i)


if __name__ == "__main__":
    t0 = time.perf_counter()
    ok = luigi.build([Noop(i=i) for i in range(N)], local_scheduler=True, workers=1, log_level="WARNING",
                     detailed_summary=False)
    elapsed = time.perf_counter() - t0
    assert ok and len(DONE) == N, (ok, len(DONE))
    print(f"ok {len(DONE)} {elapsed:.6f}")
