class TokenmillError(Exception):
    """A problem the user can fix; the message names the file, row or option."""
