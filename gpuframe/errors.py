"""Exception classes shared by the whole engine.

Every error the engine raises on purpose derives from :class:`GpuframeError`, so callers can catch
the engine's own failures apart from bugs; each message names the option, file, column or worker at
fault.
"""


class GpuframeError(Exception):
    """Base class of every error gpuframe raises on purpose."""


class OptionError(GpuframeError, ValueError):
    """An option has an unknown name or a value it cannot take."""


class ClusterError(GpuframeError, RuntimeError):
    """A cluster could not be started or joined as asked."""


class ProtocolError(ClusterError):
    """The comm protocol asked for cannot be used (unknown, or its package is missing)."""


class BackendError(ClusterError):
    """The dataframe backend asked for cannot run where the workers are."""


class PartitionError(GpuframeError, RuntimeError):
    """A partition of a distributed frame failed to compute or was lost."""


class WorkerLostError(PartitionError):
    """A worker that a job needs left the cluster or stopped answering: the message names it,
    the stage and the partitions that cannot be made. ``worker`` is its address where one is
    known, kept when the error travels from a worker's task to the client."""

    def __init__(self, message: str, worker: str | None = None) -> None:
        super().__init__(message, worker)
        self.worker = worker

    def __str__(self) -> str:  # the message alone, not the (message, worker) pair
        return str(self.args[0])


class JoinError(GpuframeError, ValueError):
    """A join was asked for with keys, types or options that cannot be joined."""


class SpeculationError(GpuframeError):
    """A join acted before its check returned (a side copied unsampled whose keys may repeat, a
    shuffle sent as the plan's estimates said), and its workers found that it guessed wrong:
    the action runs again in a job that waits for every sample (:func:`~gpuframe.execute.in_job`).
    """


class ColumnTypeError(GpuframeError, TypeError):
    """A column's type is one that this operation cannot handle."""


class UnknownColumnError(GpuframeError, KeyError):
    """An operation names a column that its frame does not have."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class ExpressionError(GpuframeError, TypeError):
    """A column expression is built or used in a way that cannot be evaluated."""


class MemoryLimitError(GpuframeError, MemoryError):
    """Work that cannot fit the memory it would run in, refused before it starts: the message
    gives the estimated size and the limits it was held against."""
