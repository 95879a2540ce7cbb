"""Pure decisions: given a resource, the observed table and the running work, what to do next.

Nothing here performs I/O; handlers call these functions and carry out what they return.
"""
