"""History limits: which finished runs to delete so a policy keeps only its recent ones.

Like CronJob's ``successfulJobsHistoryLimit``/``failedJobsHistoryLimit``: for each (policy,
kind) of a table, keep the newest ``successful_limit`` succeeded runs and the newest
``failed_limit`` failed runs, delete the older ones. Runs still pending, running or in an
unknown state are never deleted. Pure: the caller lists runs and deletes the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

from txntable.launch.run import RunState, RunStatus

_EPOCH = datetime.fromtimestamp(0, tz=UTC)


def _age_key(run: RunStatus) -> tuple[datetime, datetime, str]:
    """Order by creation (as CronJob orders by start), then finish time, then name."""
    return (run.created or _EPOCH, run.finished or _EPOCH, run.name)


def runs_to_delete(
    runs: Iterable[RunStatus], *, successful_limit: int, failed_limit: int
) -> list[RunStatus]:
    """The runs beyond the history limits, oldest first; limits must be >= 0."""
    if successful_limit < 0 or failed_limit < 0:
        raise ValueError("history limits must be >= 0")
    groups: dict[tuple[str | None, str | None, RunState], list[RunStatus]] = defaultdict(list)
    for run in runs:
        if run.state.finished:
            groups[(run.policy, run.kind, run.state)].append(run)
    doomed: list[RunStatus] = []
    for (_, _, state), members in groups.items():
        keep = successful_limit if state is RunState.SUCCEEDED else failed_limit
        members.sort(key=_age_key, reverse=True)
        doomed.extend(members[keep:])
    doomed.sort(key=_age_key)
    return doomed
