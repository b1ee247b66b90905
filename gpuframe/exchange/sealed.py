"""cuDF frames that Dask itself moves between workers (a copied side's partitions on their way to
each worker's broadcast task, partials on their way to their tree's task), sent packed in one
buffer: cuDF's own "cuda" serializers send a buffer per column, and UCX pays for each about as
much as for a copy of megabytes (benchmarks/exchange_latency.py). Off until measured on GPUs
(``RuntimeOptions.sealed_transfers``).

A frame is sealed where gpuframe's packer holds it whole (a
:class:`~gpuframe.exchange.pack.Parcel`), its index packed beside its columns (a range as its
start and step), and its columns are named by distinct strings; any other frame goes by cuDF's
serializers, as before. The receiver must read what the sender wrote, so every process of the
engine registers it: the workers by a plugin (later ones too), the client at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.protocol.cuda import cuda_deserialize, cuda_serialize

from ..once import Once
from . import bucket  # noqa: F401 (registers a parcel's serializers, dispatched below)
from .pack import Parcel, _is_cudf, split_by_destinations

if TYPE_CHECKING:
    from distributed import Client, Worker

PLUGIN_NAME = "gpuframe-sealed-transfers"

Dumps = Callable[[Any], tuple[dict, list]]
Loads = Callable[[dict, list], Any]
INDEX_COLUMN = "__gpuframe_index__"
"""Where a frame's own index travels, packed beside its columns."""


def seal(frame: Any) -> tuple[Parcel, dict] | None:
    """``frame`` as one buffer, and how its index comes back (a range's start, step and name,
    or the name of an index packed as a column): None where its columns are not labelled by
    distinct strings, its index has several levels, it has no rows or no columns, or the packer
    would not hold it whole."""
    labels = list(frame.columns)
    index = frame.index
    if len(frame) == 0 or not labels or len(set(labels)) != len(labels) or INDEX_COLUMN in labels \
            or not all(isinstance(label, str) for label in labels) or index.nlevels != 1:
        return None
    if type(index).__name__ == "RangeIndex":
        how = {"start": int(index.start), "step": int(index.step), "name": index.name}
    else:
        how = {"column": INDEX_COLUMN, "name": index.name}
        frame = frame.assign(**{INDEX_COLUMN: index})  # the packer packs columns alone
    if _is_cudf(frame):
        import cupy

        everywhere = cupy.zeros(len(frame), dtype=cupy.uint8)
    else:
        everywhere = np.zeros(len(frame), dtype=np.uint8)
    [piece] = split_by_destinations(frame, everywhere, 1, sealed=True)
    return (piece, how) if isinstance(piece, Parcel) else None


def unsealed(parcel: Parcel, how: dict) -> Any:
    """The frame :func:`seal` sealed, its index as it was."""
    frame = parcel.open()
    if "column" in how:
        frame = frame.set_index(how["column"])
    else:
        frame.index = type(frame.index)(how["start"], how["start"] + how["step"] * len(frame),
                                        how["step"])
    frame.index.name = how["name"]
    return frame


def sealed_serializers(dumps_parcel: Dumps, loads_parcel: Loads, dumps_frame: Dumps,
                       loads_frame: Loads) -> tuple[Dumps, Loads]:
    """A frame's serializers that send it as a parcel (``dumps_parcel``, ``loads_parcel``) where
    :func:`seal` can, and by ``dumps_frame``, ``loads_frame`` where not."""

    def dumps(frame: Any) -> tuple[dict, list]:
        sealed = seal(frame)
        if sealed is None:
            header, frames = dumps_frame(frame)
            return {"sealed": False, "frame": header}, frames
        parcel, how = sealed
        header, frames = dumps_parcel(parcel)
        return {"sealed": True, "parcel": header, "index": how}, frames

    def loads(header: dict, frames: list) -> Any:
        if not header["sealed"]:
            return loads_frame(header["frame"], frames)
        return unsealed(loads_parcel(header["parcel"], frames), header["index"])

    return dumps, loads


@Once
def seal_cudf_transfers() -> None:
    """In this process: cuDF frames sent over a device comm (UCX) go sealed where they can.
    Once (:class:`~gpuframe.once.Once`, not ``functools.cache``, which lets two first callers
    both run it: the client and a worker's plugin, in one process): a second run would wrap the
    sealed serializers again, whose frames a process that wrapped once cannot read."""
    import cudf

    dumps, loads = sealed_serializers(
        cuda_serialize.dispatch(Parcel), cuda_deserialize.dispatch(Parcel),
        cuda_serialize.dispatch(cudf.DataFrame), cuda_deserialize.dispatch(cudf.DataFrame))
    cuda_serialize.register(cudf.DataFrame)(dumps)
    cuda_deserialize.register(cudf.DataFrame)(loads)


class SealedTransfersPlugin(WorkerPlugin):
    """Seals the cuDF transfers of each worker it is set up on (:func:`seal_cudf_transfers`)."""

    idempotent = True

    def setup(self, worker: Worker) -> None:
        seal_cudf_transfers()


def seal_transfers(client: Client) -> None:
    """Seal the cuDF transfers of every worker of ``client``'s cluster (and every later one),
    and of this process, which gathers from them."""
    client.register_plugin(SealedTransfersPlugin(), name=PLUGIN_NAME)
    seal_cudf_transfers()
