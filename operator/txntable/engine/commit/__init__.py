"""One optimistic transaction: options, validation, isolation, conflict checks against
winning commits, row tracking, commitInfo, and the put-if-absent of the commit file.

Importing this package loads nothing.
"""
