"""Which CPUs the suppressed BE cpuset gets (reference A.7.2, ``calculateBESuppressCPUSetPolicy``).

Hyper-thread pairs first, spread round-robin over the (NUMA node, socket) groups, then single CPUs,
so BE work shares whole cores with itself rather than with the latency-sensitive pods.
"""

from __future__ import annotations

from typing import Mapping, Sequence


def be_suppress_cpus(n: int, processors: Sequence[Mapping[str, int]]) -> list[int]:
    """``n`` CPU ids out of ``processors`` (``{"id", "core", "socket", "node"}`` each), in pick order.

    Empty when fewer than ``n`` processors are given (Koordinator's rule: the caller then keeps the
    old cpuset). Buckets by (NUMA node, socket), each sorted by (core, cpu id); buckets ordered by size
    descending, ties by their first cpu id. Phase 1 takes, bucket after bucket, the first unused
    adjacent pair of one core while two or more are needed, until a full round finds none; phase 2
    continues the round-robin where phase 1 stopped, one unused CPU per bucket.
    """
    if n <= 0 or len(processors) < n:
        return []
    groups: dict[tuple[int, int], list[Mapping[str, int]]] = {}
    for p in processors:
        groups.setdefault((p.get("node", 0), p.get("socket", 0)), []).append(p)
    buckets = [sorted(g, key=lambda p: (p.get("core", p["id"]), p["id"])) for g in groups.values()]
    buckets.sort(key=lambda b: (-len(b), b[0]["id"]))
    used: set[int] = set()
    picked: list[int] = []
    need = n
    idx = 0
    misses = 0

    def pair_in(bucket: list[Mapping[str, int]]) -> tuple[int, int] | None:
        for a, b in zip(bucket, bucket[1:]):
            if (a["id"] not in used and b["id"] not in used
                    and a.get("core", a["id"]) == b.get("core", b["id"])):
                return a["id"], b["id"]
        return None

    while need > 1 and misses < len(buckets):
        pair = pair_in(buckets[idx % len(buckets)])
        idx += 1
        if pair is None:
            misses += 1
            continue
        misses = 0
        used.update(pair)
        picked.extend(pair)
        need -= 2
    misses = 0
    while need > 0 and misses < len(buckets):
        bucket = buckets[idx % len(buckets)]
        idx += 1
        cpu = next((p["id"] for p in bucket if p["id"] not in used), None)
        if cpu is None:
            misses += 1
            continue
        misses = 0
        used.add(cpu)
        picked.append(cpu)
        need -= 1
    return picked
