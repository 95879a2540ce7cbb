"""Default values of the custom resources, spelled as the CRDs spell them.

The CRD YAML carries the same values as ``default:``; a test compares them field by field,
so change both together. Sizes and durations are kept as text here (``128Mi``, ``30d``) and
parsed once by the models.
"""

from __future__ import annotations

from typing import Final

# TxnTable
OBSERVE_INTERVAL: Final = "1m"

# CompactionPolicy
TARGET_FILE_SIZE: Final = "128Mi"
MIN_FILE_SIZE: Final = "32Mi"
MIN_INPUT_FILES: Final = 2
#: Delta's auto-purge heuristic: rewrite a file once its deletion vector hides 5% of its rows
DV_PURGE_PERCENT: Final = 5
MAX_BYTES_PER_RUN: Final = "64Gi"
COOLDOWN: Final = "15m"
TIME_ZONE: Final = "UTC"
COMMIT_MAX_ATTEMPTS: Final = 10
SUCCESSFUL_RUNS_HISTORY_LIMIT: Final = 3
FAILED_RUNS_HISTORY_LIMIT: Final = 1
#: a table that needs no compaction is vacuumed at most this often (spec.vacuum.interval)
VACUUM_INTERVAL: Final = "24h"
#: reclaimable bytes that make such a table due (spec.vacuum.minReclaimableBytes): any
VACUUM_MIN_RECLAIMABLE: Final = "1"
#: our compaction runs whose conflicts are weighed (spec.avoidRecentWrites.backOff.runs)
CONFLICT_RUNS: Final = 5
#: the first and the longest conflict back-off (spec.avoidRecentWrites.backOff)
CONFLICT_INITIAL_DELAY: Final = "30m"
CONFLICT_MAX_DELAY: Final = "12h"

# CheckpointPolicy
COMMIT_INTERVAL: Final = 10
INLINE_MAX_ACTIONS: Final = 200_000
PART_SIZE: Final = 1_000_000
LOG_RETENTION: Final = "30d"
CHECKPOINT_RETENTION: Final = "2d"

# Spark template (any backend)
DRIVER_CORES: Final = 1
DRIVER_MEMORY: Final = "1Gi"
EXECUTOR_INSTANCES: Final = 2
EXECUTOR_CORES: Final = 1
EXECUTOR_MEMORY: Final = "2Gi"
RUN_TIMEOUT: Final = "2h"
#: ceilings of plan-sized runs and of the memory retry (CompactionPolicy spec.spark.autoSize)
AUTO_SIZE_MAX_INSTANCES: Final = 10
AUTO_SIZE_MAX_MEMORY: Final = "16Gi"
