"""The controller: Kopf glue (``kopf_handlers``) over one Kopf-free driver (``driver``), which
ticks a table (``operate``) and hands its status to the one writer (``status_writer``).

Only ``kopf_handlers`` imports Kopf; ``driver`` and everything under it are shared with the
local mode of the CLI (docs/architecture.md, "The controller").
"""
