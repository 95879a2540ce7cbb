"""From a log to a snapshot: the log segment, ``_last_checkpoint``, checkpoint parts, the
reconciled state, data skipping, and the controller's summary and activity views.

Importing this package loads nothing.
"""
