"""Writing data: Parquet files (``writer``, ``parquet_options``), row deletes with deletion
vectors, and the create/append/overwrite/delete operations behind ``Table`` (``api``).

Importing this package loads nothing.
"""
