"""Typed errors of the store package, so the server and the command line can answer clearly.

A store error never means "crash": the server turns it into a RocketMQ error code, the command line
into a message naming the file.
"""

from __future__ import annotations


class StoreError(ValueError):
    """Base of every error the store package raises on purpose.

    A ``ValueError``, like ``protocol.ProtocolError`` and ``ConfigError``: what is wrong is the content
    or geometry of files, or an argument, so callers that already report bad values report these too.
    """


class IndexGeometryError(StoreError):
    """An IndexFile's size does not match the configured slot and entry counts."""


class IndexFileError(StoreError):
    """An IndexFile cannot be opened, created or written."""


class CheckpointError(StoreError):
    """The checkpoint file is missing, short or unwritable."""


class CommitLogError(StoreError):
    """The CommitLog directory is unusable (unreadable files, inconsistent names or sizes)."""


class DispatchWriteError(StoreError):
    """A consume queue or IndexFile write failed (a full disk) after its record was stored.

    Nothing of the failed entry is left half-written and the dispatcher's resume point stays at that
    record, so the reput dispatches it again on its next pass: the entries are repaired once space
    returns (or at the next start). The write path refuses SENDs meanwhile, as the broker's
    ``RunningFlags`` do after a consume queue or index write error.
    """


class IndexWriteError(IndexFileError, DispatchWriteError):
    """The blocks an IndexFile write needs could not be reserved (``posix_fallocate``): nothing written."""


class ConsumeQueueWriteError(DispatchWriteError):
    """A consume queue entry could not be written: the queue ends at its last whole entry."""
