"""The call defaults, here only: the gateway uses them and the CLI's --concurrency, --retries
and --timeout default to them. A module of their own so that the CLI's options (read for
`workbench --help`) do not import the gateway (issue 35: start-up costs what the command needs).
"""

CONCURRENCY = 8
"""Parallel calls to a remote model (a local one runs one example after another)."""
MAX_RETRIES = 4
"""Retries per call after the first attempt (429, 5xx, timeouts, connection errors)."""
TIMEOUT = 60.0
"""Seconds for each attempt of a call, the whole reply included."""
