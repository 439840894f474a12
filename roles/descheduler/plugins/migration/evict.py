"""Evict = create a PodMigrationJob for the pod (reference §1.7.3); with ``dryRun`` only log."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from koordinator.apis import migration as mj
from koordinator.apis.goduration import format_go_duration
from koordinator_roles.descheduler.framework.interfaces import EvictOptions
from koordinator_roles.descheduler.plugins.migration.args import MigrationControllerArgs

log = logging.getLogger("koordinator.descheduler.migration")

Obj = dict[str, Any]


def build_job(pod: Obj, options: EvictOptions, args: MigrationControllerArgs, created_by: str) -> Obj:
    """The PodMigrationJob that migrates ``pod`` (random name: a pod may be migrated many times)."""
    meta = pod["metadata"]
    annotations = {**options.annotations, mj.ANNOTATION_EVICT_REASON: options.reason,
                   mj.ANNOTATION_EVICT_TRIGGER: options.plugin_name, mj.ANNOTATION_JOB_CREATED_BY: created_by}
    spec: Obj = {"podRef": {"kind": "Pod", "apiVersion": "v1", "namespace": meta.get("namespace"),
                            "name": meta.get("name"), "uid": meta.get("uid")},
                 "mode": args.default_job_mode}
    if args.default_job_ttl_seconds > 0:
        spec["ttl"] = format_go_duration(int(args.default_job_ttl_seconds * 1e9))
    delete_options = options.delete_options or args.default_delete_options
    if delete_options:
        spec["deleteOptions"] = dict(delete_options)
    return {"apiVersion": mj.GROUP_VERSION, "kind": mj.KIND,
            "metadata": {"name": str(uuid.uuid4()), "labels": dict(options.labels), "annotations": annotations},
            "spec": spec, "status": {"phase": mj.PHASE_PENDING}}


def create_job(client: Any, pod: Obj, options: EvictOptions, args: MigrationControllerArgs,
               created_by: str) -> Obj | None:
    """Create the PMJ (None with dryRun, after logging what would have been created)."""
    meta = pod["metadata"]
    if args.dry_run:
        log.info("dry run: would migrate pod %s/%s (trigger %s, reason %s)", meta.get("namespace"),
                 meta.get("name"), options.plugin_name, options.reason)
        return None
    return client.create(build_job(pod, options, args, created_by))
