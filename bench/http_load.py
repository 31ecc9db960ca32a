"""A separate load process: N threads POSTing JSON over keep-alive connections for S seconds.

Run: python -m bench.http_load PORT PATH KEY CONCURRENCY SECONDS [WARMUP]  (prints one JSON line)

With WARMUP, the same connections first send requests for that many seconds
and only what follows is measured: the steady state, not the opening of 16
connections and the server's first requests on them.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections import Counter


def main() -> None:
    port, path, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    concurrency, seconds = int(sys.argv[4]), float(sys.argv[5])
    warmup = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(concurrency + 1)
    measure_from, stop_at = [0.0], [0.0]

    def run(worker: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        mine: list[float] = []
        seen: Counter[int] = Counter()
        start.wait()
        i = 0
        while time.perf_counter() < stop_at[0]:
            body = json.dumps({"email": f"load-{worker}-{i}@example.com"})
            began = time.perf_counter()
            conn.request("POST", path, body, headers)
            reply = conn.getresponse()
            reply.read()
            if began >= measure_from[0]:
                mine.append(time.perf_counter() - began)
                seen[reply.status] += 1
            i += 1
        with lock:
            latencies.extend(mine)
            statuses.update(seen)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    measure_from[0] = time.perf_counter() + warmup
    stop_at[0] = measure_from[0] + seconds
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - measure_from[0]  # to the last measured reply
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000

    print(json.dumps({
        "requests": len(ordered), "rps": len(ordered) / elapsed, "p50_ms": pct(0.5),
        "p95_ms": pct(0.95), "p99_ms": pct(0.99), "statuses": dict(statuses),
    }))


if __name__ == "__main__":
    main()
