"""``koordinator explain pod NAMESPACE/NAME``: why the scheduler placed a pod where it did, or nowhere.

It reads the pod and its ScheduleExplanation (same namespace and name, written by the scheduler when
its ``ScheduleExplanation`` feature gate is on; ``koordinator local`` turns it on) and prints:

- a pod the last cycle could not place: each filter plugin's reasons with the nodes it rejected, the
  PreFilter rejection or the preemption outcome;
- a placed pod: a table of the Score plugins' scores (normalised score × weight) on the chosen node
  and the next best nodes.

Without a ScheduleExplanation it prints the pod's PodScheduled condition and says that per-plugin
details need the gate. Talks to the cluster through the runtime's client only; imports no role.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from koordinator.apis.explanation import DETAILS_ANNOTATION, GATE, KIND

#: What ``explain`` can explain (kubectl's names for pods).
RESOURCES = ("pod", "pods", "po")


def _resource(value: str) -> str:
    if value not in RESOURCES:
        raise argparse.ArgumentTypeError(f'Invalid value: "{value}": only a pod can be explained (want "pod")')
    return "pod"


def _pod_key(value: str) -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f'Invalid value: "{value}": want NAMESPACE/NAME')
    return namespace, name


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``explain`` subcommand to the ``koordinator`` parser."""
    p = sub.add_parser(
        "explain",
        usage="koordinator explain pod NAMESPACE/NAME [--kubeconfig PATH]",
        help="explain the scheduler's last decision about a pod",
        description="Explain the scheduler's last decision about a pod: for a pending pod each filter plugin's "
                    "verdict with the nodes it rejected, for a placed pod the chosen node's score per plugin "
                    f"beside the next best nodes (from its ScheduleExplanation: the scheduler's {GATE} feature "
                    "gate must be on).",
    )
    p.add_argument("resource", type=_resource, metavar="KIND", help="what to explain: pod (the only kind)")
    p.add_argument("pod", type=_pod_key, metavar="NAMESPACE/NAME", help="the pod")
    p.add_argument("--kubeconfig", default=None, metavar="PATH",
                   help="kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config)")
    return p


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print the explanation of ``args.pod``; 1 (one line on stderr) when the pod or the cluster is not there."""
    from koordinator.runtime.client import Client
    from koordinator.runtime.errors import ApiError, NotFound
    from koordinator.runtime.kubeconfig import ConfigError

    out, err = out or sys.stdout, err or sys.stderr
    namespace, name = args.pod
    try:
        client = Client.from_kubeconfig(args.kubeconfig, max_attempts=2)
    except (ConfigError, OSError) as e:
        err.write(f"koordinator explain: error: {e}\n")
        return 1
    try:
        try:
            pod = client.get("Pod", name, namespace)
        except NotFound:
            err.write(f"koordinator explain: error: pod {namespace}/{name} not found\n")
            return 1
        try:
            explanation: dict | None = client.get(KIND, name, namespace)
        except NotFound:
            explanation = None
    except ApiError as e:
        err.write(f"koordinator explain: error: reading pod {namespace}/{name}: {e}\n")
        return 1
    finally:
        client.close()
    out.write(render(pod, explanation))
    return 0


# -- rendering -------------------------------------------------------------------------------------------

def render(pod: dict, explanation: dict | None) -> str:
    """The report for ``pod`` and its ScheduleExplanation (None: none, or one of an earlier pod of that name)."""
    meta = pod.get("metadata") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    node = (pod.get("spec") or {}).get("nodeName") or ""
    if explanation is not None and not _of_pod(explanation, pod):
        explanation = None
    lines = [f"Pod {key}: " + (f"bound to {node}" if node else "not bound to a node")]
    status = (explanation or {}).get("status") or {}
    if not status:
        lines += _without_explanation(pod)
        return "\n".join(lines) + "\n"
    when = status.get("lastUpdateTime")
    details = _details(explanation or {})
    if status.get("schedulable"):
        lines.append(f"Last scheduling cycle{f' ({when})' if when else ''}: schedulable")
        lines += _scores(details)
    else:
        lines.append(f"Last scheduling cycle{f' ({when})' if when else ''}: unschedulable")
        lines.append(f"  {status.get('failedMessage') or '(no message)'}")
        lines += _failures(status, details)
        if status.get("schedulableAfterPreemption"):
            lines.append("Preemption: the pod was nominated to a node; it goes there once the victims are gone.")
    return "\n".join(lines) + "\n"


def _of_pod(explanation: dict, pod: dict) -> bool:
    """Whether the ScheduleExplanation is about this pod (not an earlier one of the same name)."""
    uid = (pod.get("metadata") or {}).get("uid")
    owners = [o.get("uid") for o in (explanation.get("metadata") or {}).get("ownerReferences") or []
              if o.get("kind") == "Pod"]
    return not owners or not uid or uid in owners


def _without_explanation(pod: dict) -> list[str]:
    condition = next((c for c in (pod.get("status") or {}).get("conditions") or []
                      if c.get("type") == "PodScheduled"), None)
    lines = []
    if condition is None:
        lines.append("PodScheduled: (no condition yet: the scheduler has not tried this pod)")
    else:
        text = f"PodScheduled={condition.get('status')}"
        if condition.get("reason"):
            text += f" ({condition['reason']})"
        if condition.get("message"):
            text += f": {condition['message']}"
        lines.append(text)
    lines.append(f"No ScheduleExplanation for this pod: the scheduler's {GATE} feature gate must be on "
                 f"(--feature-gates={GATE}=true) for per-plugin details.")
    return lines


def _details(explanation: dict) -> dict:
    text = ((explanation.get("metadata") or {}).get("annotations") or {}).get(DETAILS_ANNOTATION) or ""
    try:
        document = json.loads(text) if text else {}
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def _failures(status: dict, details: dict) -> list[str]:
    entries = ((status.get("detailedExplanation") or [{}])[0].get("scheduleExplanation") or {}).get(
        "nodeFailedDetails") or []
    counts = details.get("failedNodeCounts") or []
    if not entries:
        return []
    lines = ["Filter verdicts (plugin → reason → nodes):"]
    by_plugin: dict[str, list[tuple[str, list[str], int]]] = {}
    for i, entry in enumerate(entries):
        nodes = list(entry.get("failedNodes") or [])
        count = counts[i] if i < len(counts) and isinstance(counts[i], int) else len(nodes)
        by_plugin.setdefault(entry.get("failedPlugin") or "(unknown plugin)", []).append(
            (entry.get("reason") or "", nodes, count))
    for plugin in sorted(by_plugin):
        lines.append(f"  {plugin}")
        for reason, nodes, count in by_plugin[plugin]:
            lines.append(f"    {reason}: {_node_list(nodes, count)}")
    return lines


def _node_list(nodes: list[str], count: int) -> str:
    if not nodes:
        return f"all {count} node(s) (rejected before filtering)" if count else "every node"
    text = ", ".join(nodes)
    if count > len(nodes):
        text += f" (+{count - len(nodes)} more)"
    return f"{count} node(s): {text}"


def _scores(details: dict) -> list[str]:
    chosen = details.get("chosenNode") or ""
    nodes: list[dict[str, Any]] = details.get("nodes") or []
    plugins: list[dict[str, Any]] = details.get("plugins") or []
    if chosen:
        lines = [f"  chosen node: {chosen}"]
    else:
        lines = []
    if not nodes or not plugins:
        lines.append("  (no scores: only one node was feasible, or no Score plugin ran)")
        return lines
    lines.append("Scores (normalised score × weight; the chosen node first, then the next best):")
    header = ["PLUGIN", "WEIGHT"] + [n["name"] + ("*" if n["name"] == chosen else "") for n in nodes]
    rows = [header]
    for p in plugins:
        weight = int(p.get("weight") or 1)
        rows.append([p["name"], str(weight)] + [
            str(int((n.get("scores") or {}).get(p["name"], 0)) * weight) for n in nodes])
    rows.append(["TOTAL", ""] + [str(n.get("total", "")) for n in nodes])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines
