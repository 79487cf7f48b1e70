def one_line(e: BaseException) -> str:
    """What an exception says, on one line (its type when it says nothing)."""
    return " ".join(str(e).split()) or type(e).__name__


class TokenmillError(Exception):
    """A problem the user can fix; the message names the file, row or option."""


class WriteError(TokenmillError):
    """An output could not be written (disk full, read-only folder): never a
    bad input, so --on-error skip does not skip it."""


class StoreError(TokenmillError):
    """The object store holding an input failed while it was read (unreachable,
    no credentials, a connection dropped after retries): never a bad input, so
    --on-error skip does not skip it; a rerun resumes."""


class WorkerLost(TokenmillError):
    """A worker process died under a stage (killed by the system, most often
    for memory): nothing it was writing is kept, and a rerun resumes. The CLI
    exits with status 137, as for a run killed whole."""
