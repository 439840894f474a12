"""The benchmark scripts report what they measured: ``ok`` is computed from the outcome (false when
pods stay unbound), the algorithm figure comes from the scheduler's own cycle function, and the
koordlet bench measures each case in a process of its own. Tiny cases, no timed assertions.
"""

from __future__ import annotations

import gc
import importlib
import os
from pathlib import Path

import pytest

from koordinator_roles.scheduler.scheduler import Scheduler

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

#: More than half a bench node's 4 CPUs: two nodes take one such pod each, a third stays unbound.
BIG_POD = {"cpu": "3", "memory": "1Gi"}


@pytest.fixture
def scripts(monkeypatch):
    """Imports a script of scripts/ by module name (also importable by a spawned child: the child
    gets the parent's sys.path)."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    yield importlib.import_module
    # bench_algorithm freezes every live object, as the scheduler process does; the rest of the
    # test session must keep a working cyclic collector.
    gc.unfreeze()


def test_algorithm_ok_only_when_every_pod_is_placed(scripts):
    bench = scripts("bench_scheduler")
    placed = bench.bench_algorithm(nodes=2, init_pods=1, pods=3, loadaware=False)
    assert placed["ok"] is True
    assert placed["scheduled"] == placed["attempted"] == 3

    crowded = bench.bench_algorithm(nodes=2, init_pods=0, pods=3, loadaware=False, pod_resources=BIG_POD)
    assert crowded["ok"] is False
    assert crowded["attempted"] == 3 and crowded["scheduled"] == 2


def test_algorithm_runs_the_schedulers_own_cycle(scripts, monkeypatch):
    """The figure times ``Scheduler.schedule_one`` itself, once per measured pod — not a copy of it."""
    bench = scripts("bench_scheduler")
    calls = []
    real = Scheduler.schedule_one

    def counting(self, qpi):
        calls.append(qpi.pod_info.name)
        return real(self, qpi)

    monkeypatch.setattr(Scheduler, "schedule_one", counting)
    result = bench.bench_algorithm(nodes=3, init_pods=0, pods=4, loadaware=True)
    assert sorted(calls) == [f"pod-{i}" for i in range(4)]
    assert result["ok"] is True


def test_end_to_end_ok_is_false_when_pods_stay_unbound(scripts, tmp_path):
    """Two of three pods fit: the bench ends once the third is reported Unschedulable (not at its
    timeout) and says the run did not bind every pod."""
    bench = scripts("bench_scheduler")
    result = bench.bench_end_to_end(nodes=2, init_pods=0, pods=3, loadaware=False, workdir=tmp_path,
                                    pod_resources=BIG_POD, timeout=120)
    assert result["stopped"] == "settled"
    assert (result["bound"], result["unschedulable"]) == (2, 1)
    assert result["ok"] is False
    assert "scheduler_log_tail" in result


def test_koordlet_cases_run_in_their_own_process(scripts, tmp_path):
    bench = scripts("bench_koordlet")
    assert bench.in_own_process(os.getpid) != os.getpid()
    rounds = bench.in_own_process(bench.bench_rounds, 2, 3, tmp_path)
    assert rounds["pods"] == 2 and rounds["rss_mb"] > 0


def test_koordlet_enforcement_cases_report_ok_from_their_figures(scripts, tmp_path):
    """Tiny enforcement cases in their own process: every strategy ran without error, and the BE
    cpuset narrowed after the LS spike in every trial (figures not asserted: no timed assertions)."""
    bench = scripts("bench_koordlet")
    enforce = bench.in_own_process(bench.bench_round, 4, 3, tmp_path)
    assert enforce["errors"] == {} and "CPUSuppress" in enforce["strategies"]
    assert enforce["ok"] is (enforce["cpu_ms_per_round_median"] <= enforce["target_ms"])
    reaction = bench.in_own_process(bench.bench_reaction, 4, tmp_path, 1)
    assert reaction["trials"] == 1 and reaction["missed"] == 0
    assert reaction["ok"] is (reaction["reaction_s_median"] <= reaction["target_s"])


def test_runtime_proxy_bench_reports_added_latency_and_targets(scripts):
    """A tiny run against a private containerd: every call has its figures, the hooks answered, and
    ``met``/``ok`` follow from the figures (not asserted: no timed assertions)."""
    from tests.containerd_harness import containerd_problem

    problem = containerd_problem()
    if problem:
        pytest.skip(problem)
    bench = scripts("bench_runtime_proxy")
    out = bench.bench(calls=5, hooked_calls=3, create_calls=1, containers=1, warmup=1)
    assert out["errors"] == [] and out["proxy_exit_code"] == 0
    assert set(out["pass_through"]) == {"Version", "ListContainers", "ContainerStatus", "ImageStatus"}
    assert set(out["hooked"]) == {"UpdateContainerResources", "CreateContainer", "RemoveContainer"}
    for case in [*out["pass_through"].values(), *out["hooked"].values()]:
        for p in ("p50", "p99"):
            assert case[f"added_{p}_ms"] == pytest.approx(case[f"proxied_{p}_ms"] - case[f"direct_{p}_ms"], abs=0.002)
    assert out["hooked"]["UpdateContainerResources"]["hook_answers"] == 3
    assert out["hooked"]["CreateContainer"]["hook_answers"] == 1
    assert out["hooks_answered"] is True
    for key, section in (("pass_through_added_p99_ms", "pass_through"), ("hooked_added_p99_ms", "hooked")):
        target = out["targets"][key]
        worst = max(case["added_p99_ms"] for case in out[section].values())
        assert target["worst"] == worst
        assert target["met"] is (worst <= target["target"])
    assert out["ok"] is all(t["met"] for t in out["targets"].values())


def test_descheduler_migration_bench_moves_every_pod_through_the_processes(scripts):
    """A few EvictDirectly jobs through real ``koordinator apiserver`` and ``--role=descheduler`` processes: every
    job Succeeded by evicting its pod, and the descheduler's CPU time is reported (figures not asserted)."""
    bench = scripts("bench_descheduler_migration")
    out = bench.bench_migration(jobs=3, modes=("EvictDirectly",), timeout=60)
    run = out["modes"]["EvictDirectly"]
    assert run["ok"] is True and out["ok"] is True, run
    assert (run["succeeded"], run["failed"], run["unfinished"], run["succeeded_not_as_the_mode_says"]) == (3, 0, 0, 0)
    assert run["stopped"] == "finished" and run["descheduler_cpu_seconds"] >= 0
