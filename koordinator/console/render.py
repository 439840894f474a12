"""The console's snapshots as ``rich`` renderables, and as plain text for ``--once`` and pipes."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from koordinator.console.model import ClusterSnapshot, EventRow, NodeSnapshot, PodRow

SPARK = "▁▂▃▄▅▆▇█"
#: Width of the sparklines (the newest samples).
SPARK_WIDTH = 30
PANES = ("node", "cluster")


# -- formatting -------------------------------------------------------------------------------------------

def cores(milli: int | None) -> str:
    """Millicores as cores with two decimals (``8.00``), ``-`` when unknown."""
    return "-" if milli is None else f"{milli / 1000:.2f}"


def size(n: int | float | None) -> str:
    """Bytes in binary units (``1.5Gi``), ``-`` when unknown."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("", "Ki", "Mi", "Gi", "Ti"):
        if abs(value) < 1024 or unit == "Ti":
            return f"{value:.0f}{unit}" if unit == "" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}Ti"


def percent(used: int | None, total: int) -> str:
    return "-" if used is None or total <= 0 else f"{100 * used / total:.0f}%"


def sparkline(values: Sequence[float], top: float | None = None, width: int = SPARK_WIDTH) -> str:
    """The newest ``width`` values as block characters, scaled to ``top`` (or their maximum)."""
    values = list(values)[-width:]
    if not values:
        return ""
    high = top if top and top > 0 else max(values) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, max(0, int(v / high * (len(SPARK) - 1) + 0.5)))] for v in values)


def _table(title: str, *columns: str, **kwargs: Any) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, expand=False, **kwargs)
    for c in columns:
        table.add_column(c, justify="right" if c.endswith("#") else "left", overflow="fold")
    return table


def _matches(text: str, needle: str) -> bool:
    return not needle or needle.lower() in text.lower()


def _events(title: str, rows: list[EventRow]) -> RenderableType:
    if not rows:
        return Text(f"{title}: none")
    table = _table(title, "time", "object", "reason", "count", "message")
    for e in rows:
        table.add_row(e.time, e.object, e.reason, str(e.count), e.message)
    return table


# -- node view --------------------------------------------------------------------------------------------

def node_view(s: NodeSnapshot, needle: str = "") -> RenderableType:
    """The node view: usage against allocatable with history, pods by QoS, BE state, SLO, evictions, audit, hooks."""
    parts: list[RenderableType] = []
    head = Text()
    head.append(f"node {s.node}", style="bold")
    head.append(f"  {'Ready' if s.ready else 'NotReady'}", style="green" if s.ready else "red")
    head.append(f"  usage from {s.usage_source}")
    if s.metric_time:
        head.append(f"  NodeMetric updated {s.metric_time}")
    parts.append(head)

    res = _table("Resources", "resource", "used", "allocatable", "use%", "batch allocatable", "history")
    res.add_row("cpu (cores)", cores(s.cpu_usage), cores(s.cpu_allocatable), percent(s.cpu_usage, s.cpu_allocatable),
                cores(s.batch_cpu) if s.batch_cpu else "-",
                sparkline(s.cpu_history, s.cpu_allocatable / 1000 if s.cpu_allocatable else None))
    res.add_row("memory", size(s.memory_usage), size(s.memory_allocatable),
                percent(s.memory_usage, s.memory_allocatable), size(s.batch_memory) if s.batch_memory else "-",
                sparkline(s.memory_history, float(s.memory_allocatable) or None))
    parts.append(res)

    pods = _table("Pods by QoS class", "qos", "pod", "phase", "priority", "cpu used", "cpu req", "cpu lim",
                  "mem used", "mem req", "mem lim")
    shown = 0
    for qos, rows in s.pods_by_qos():
        rows = [p for p in rows if _matches(p.key, needle)]
        for i, p in enumerate(rows):
            pods.add_row(qos if i == 0 else "", p.key, p.phase, p.priority or "-", *_pod_figures(p),
                         end_section=i == len(rows) - 1)
        shown += len(rows)
    if shown == 0:
        pods.add_row("", "(no pods" + (f" matching {needle!r}" if needle else "") + ")", *[""] * 8)
    parts.append(pods)

    be = Text("BE suppression: ", style="bold")
    if s.be is None:
        be.append("no cgroup tree read (--cgroup-root)")
    else:
        be.append(f"cpuset {s.be.cpuset or '-'} ({s.be.cpus if s.be.cpus is not None else '-'} cpus)")
        be.append(f", cfs quota {'unlimited' if s.be.quota_cores is None else f'{s.be.quota_cores:.2f} cores'}")
    if s.be_reason:
        be.append(f"; last: {s.be_reason}")
    parts.append(be)
    slo = Text("NodeSLO thresholds: ", style="bold")
    if s.thresholds is None:
        slo.append("no NodeSLO for this node")
    else:
        slo.append(" ".join(f"{k}={v}" for k, v in s.thresholds.items()) or "(none set)")
    parts.append(slo)
    parts.append(_events("Recent evictions", s.evictions))

    if s.audit:
        audit = _table("Executor audit log (tail)", "time", "owner", "file", "old", "new", "reason")
        for e in s.audit:
            audit.add_row(str(e.get("time", "")), str(e.get("owner", "")), _short(str(e.get("file", ""))),
                          _clip(e.get("old")), _clip(e.get("new")), str(e.get("reason", "")))
        parts.append(audit)
    else:
        parts.append(Text("Executor audit log: no entries (--run-dir)"))
    hooks = Text("Runtime hooks: ", style="bold")
    if s.hook_registration:
        reg = s.hook_registration
        hooks.append(f"server {reg.get('remote-endpoint', '?')} for {', '.join(reg.get('runtime-hooks') or [])}; ")
    if s.hooks:
        hooks.append("; ".join(f"{h.plugin} {h.writes} writes (last {h.last})" for h in s.hooks))
    else:
        hooks.append("no hook writes in the audit log's tail")
    parts.append(hooks)
    parts.extend(Text(f"note: {n}", style="yellow") for n in s.notes)
    return Group(*parts)


def _pod_figures(p: PodRow) -> list[str]:
    return [cores(p.cpu_usage), cores(p.cpu_request) if p.cpu_request else "-",
            cores(p.cpu_limit) if p.cpu_limit else "-", size(p.memory_usage),
            size(p.memory_request) if p.memory_request else "-", size(p.memory_limit) if p.memory_limit else "-"]


def _short(path: str) -> str:
    """A cgroup file from its kubepods directory on (the root is the same on every line)."""
    i = path.find("kubepods")
    return path[i:] if i >= 0 else path


def _clip(value: Any, width: int = 24) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


# -- cluster view ------------------------------------------------------------------------------------------

def cluster_view(s: ClusterSnapshot, needle: str = "") -> RenderableType:
    """The cluster view: nodes with usage and batch allocatable, pending pods, quotas, gangs, reservations,
    migrations, evictions."""
    parts: list[RenderableType] = []
    nodes = _table("Nodes", "node", "ready", "cpu used", "cpu alloc", "cpu%", "mem used", "mem alloc", "mem%",
                   "batch-cpu", "batch-mem", "pods", "cpu history")
    for n in s.nodes:
        if not _matches(n.name, needle):
            continue
        nodes.add_row(n.name, "yes" if n.ready else "no", cores(n.cpu_usage), cores(n.cpu_allocatable),
                      percent(n.cpu_usage, n.cpu_allocatable), size(n.memory_usage), size(n.memory_allocatable),
                      percent(n.memory_usage, n.memory_allocatable), cores(n.batch_cpu) if n.batch_cpu else "-",
                      size(n.batch_memory) if n.batch_memory else "-", str(n.pods),
                      sparkline(n.cpu_history, n.cpu_allocatable / 1000 if n.cpu_allocatable else None))
    parts.append(nodes)
    pending = [(k, r) for k, r in s.pending if _matches(k, needle)]
    if pending:
        table = _table("Pending pods", "pod", "scheduler's reason")
        for key, reason in pending:
            table.add_row(key, reason)
        parts.append(table)
    else:
        parts.append(Text("Pending pods: none"))
    for title, rows, columns in (("Elastic quotas", s.quotas, ("name", "min", "max", "used")),
                                 ("Gangs (PodGroups)", s.gangs, ("name", "minMember", "phase", "scheduled", "running")),
                                 ("Reservations", s.reservations,
                                  ("name", "phase", "node", "allocatable", "allocated")),
                                 ("Migrations", s.migrations, ("name", "pod", "phase", "reason"))):
        rows = [r for r in rows if _matches(" ".join(r.values()), needle)]
        if not rows:
            parts.append(Text(f"{title}: none"))
            continue
        table = _table(title, *columns)
        for r in rows:
            table.add_row(*(r.get(c, "") for c in columns))
        parts.append(table)
    parts.append(_events("Recent evictions", [e for e in s.evictions if _matches(e.object, needle)]))
    parts.extend(Text(f"note: {n}", style="yellow") for n in s.notes)
    return Group(*parts)


def plain(renderable: RenderableType, width: int = 160) -> str:
    """``renderable`` as plain text (no ANSI codes), ``width`` columns wide."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None, no_color=True,
                      highlight=False, emoji=False, legacy_windows=False)
    console.print(renderable)
    return out.getvalue()
