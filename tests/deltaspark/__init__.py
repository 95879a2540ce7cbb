"""delta-spark, Delta Lake's reference implementation, as a test oracle and co-writer: its own
environment (``env``), a JSON-lines server in that environment (``server``), the client the tests
drive it with (``client``), the canonical row form both sides share (``canon``), what the tests
share (``support``: our CLI, retained versions, read checks) and the race harness (``race``)."""
