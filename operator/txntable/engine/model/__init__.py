"""The protocol's vocabulary: log actions, schema, table features, column mapping
(``physical``), predicates, per-file statistics and deletion vectors.

Importing this package loads nothing.
"""
