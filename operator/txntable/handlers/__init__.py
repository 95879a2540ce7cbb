"""The controller: Kopf glue (``kopf_handlers``) over one Kopf-free reconcile (``operate``).

Only ``kopf_handlers`` imports Kopf; ``operate`` is shared with the local mode of the CLI.
"""
