"""Names the API server and every component must agree on: group, version, kinds, labels.

Kept in one module so the CRDs, the controller, the launchers and the tests never spell a
plural or a label twice.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "txntable.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
#: Not "txntable": kubectl expands a category before a resource name, so a category equal to
#: the singular of TxnTable would turn `kubectl get txntable NAME` into a get of all three kinds.
CATEGORY: Final = "txntable-all"

KIND_TABLE: Final = "TxnTable"
KIND_COMPACTION_POLICY: Final = "CompactionPolicy"
KIND_CHECKPOINT_POLICY: Final = "CheckpointPolicy"

PLURAL_TABLE: Final = "txntables"
PLURAL_COMPACTION_POLICY: Final = "compactionpolicies"
PLURAL_CHECKPOINT_POLICY: Final = "checkpointpolicies"

SINGULAR: Final = {
    KIND_TABLE: "txntable",
    KIND_COMPACTION_POLICY: "compactionpolicy",
    KIND_CHECKPOINT_POLICY: "checkpointpolicy",
}
PLURALS: Final = {
    KIND_TABLE: PLURAL_TABLE,
    KIND_COMPACTION_POLICY: PLURAL_COMPACTION_POLICY,
    KIND_CHECKPOINT_POLICY: PLURAL_CHECKPOINT_POLICY,
}
SHORT_NAMES: Final = {
    KIND_TABLE: ("txtbl",),
    KIND_COMPACTION_POLICY: ("txcomp",),
    KIND_CHECKPOINT_POLICY: ("txckpt",),
}

# Labels on every child object (runs, Jobs, SparkApplications, ConfigMaps).
LABEL_TABLE: Final = f"{GROUP}/table"
LABEL_POLICY: Final = f"{GROUP}/policy"
LABEL_RUN: Final = f"{GROUP}/run"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "txntable-operator"
LABEL_KIND: Final = f"{GROUP}/kind"  # optimize | checkpoint

# Annotations on runs: what a label value cannot hold (full names, times).
ANNOTATION_SCHEDULED_TIME: Final = f"{GROUP}/scheduled-time"
ANNOTATION_ATTEMPT: Final = f"{GROUP}/attempt"
ANNOTATION_TABLE: Final = f"{GROUP}/table-name"
ANNOTATION_POLICY: Final = f"{GROUP}/policy-name"
#: A run's Spark resources and where they came from (``launch.sizing.Sizing``, JSON)
ANNOTATION_SIZING: Final = f"{GROUP}/sizing"

# Annotation on a TxnTable: the planId (status.plan.planId) a user approves to run, for a
# CompactionPolicy with spec.requireApproval.
ANNOTATION_APPROVE_PLAN: Final = f"{GROUP}/approve-plan"

# Finalizer the controller puts on tables it watches.
FINALIZER: Final = f"{GROUP}/finalizer"
