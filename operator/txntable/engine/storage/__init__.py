"""Where a table's bytes live: the ``Storage`` interface (``base``), local, in-memory, S3
and Azure stores, their options, and ``factory.open_storage`` that picks one for a URI.

Importing this package loads nothing.
"""
