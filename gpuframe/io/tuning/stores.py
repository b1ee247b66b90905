"""The concurrency of each read: configured, or chosen from its store's probes, which each
process makes once per store and keeps (:func:`remembered_concurrency`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from urllib.parse import urlparse

from ..storage.base import RangeSource, StorageOptions, storage_options
from .model import (
    DEFAULT_REQUEST_SIZE,
    UNMEASURED_REQUESTS,
    Concurrency,
    StoreProbe,
    choose_concurrency,
)
from .probe import probe_storage

logger = logging.getLogger("gpuframe")

Store = tuple[str, str, str | None]
Probe = Callable[[], tuple[Sequence[StoreProbe], int, int]]

_measured: dict[Store, tuple[tuple[StoreProbe, ...], int, int]] = {}
_probing: set[Store] = set()  # stores probed in a thread of their own (concurrency_meanwhile)
_measured_lock = threading.Lock()


def store_of(path: str, storage: StorageOptions) -> Store:
    """What one measurement covers: a scheme and host (and the S3 endpoint)."""
    if "://" not in path or path.startswith("file://"):
        return ("file", "", None)
    parsed = urlparse(path)
    return (parsed.scheme, parsed.netloc, storage.endpoint if parsed.scheme == "s3" else None)


def forget_measurements() -> None:
    """Drop every store's probes, so the next read measures again."""
    with _measured_lock:
        _measured.clear()


def remembered_concurrency(path: str, storage: StorageOptions, probe: Probe,
                           fragment_bytes: int | None = None) -> Concurrency:
    """The concurrency for ``path``'s store: configured, or chosen (:func:`choose_concurrency`)
    for this read's ``storage`` options and ``fragment_bytes`` from the store's probes, made
    by ``probe()`` (the probes, the readers that will share the store, and those of them on
    the busiest host) on its first read.

    An explicit ``requests_in_flight`` option wins over any measurement. The probes are kept
    per store (scheme, host and S3 endpoint) for the life of the process, so only the first
    read of a store pays for them (:func:`forget_measurements` clears them); the choice is
    made again for each read, since it depends on the read: a plan of 128 MiB partitions caps
    requests at 4 MiB where 32 streams must share a partition, and a choice kept from it held
    a GPU's reads of 4 GiB partitions to 4 MiB requests, slower than 16 MiB
    (benchmarks/results/2026-11-23-remote-device-copies-h200.md)."""
    if storage.requests_in_flight is not None:
        return Concurrency(0.0, 0.0, storage.requests_in_flight,
                           storage.task_size or DEFAULT_REQUEST_SIZE, "configured")
    store = store_of(path, storage)
    with _measured_lock:
        known = _measured.get(store)
    if known is None:
        probes, readers, node_readers = probe()
        with _measured_lock:
            known = _measured.setdefault(store, (tuple(probes), readers, node_readers))
    return choose_concurrency(known[0], storage, readers=known[1],
                              fragment_bytes=fragment_bytes, node_readers=known[2])


def concurrency_meanwhile(path: str, storage: StorageOptions, probe: Probe,
                          fragment_bytes: int | None = None) -> Concurrency:
    """:func:`remembered_concurrency`, except that a store not measured yet is probed in a
    thread of its own while this read goes on with :func:`unmeasured_concurrency`; later reads
    choose from the probe once it is in. For local files: their probe was most of the client's
    planning in a process's first query, more than any setting gains a read from the page cache
    or a local disk (benchmarks/results/2026-11-29-s38-gpu-h200.md)."""
    store = store_of(path, storage)
    with _measured_lock:
        known = store in _measured or storage.requests_in_flight is not None
        start = not known and store not in _probing
        if start:
            _probing.add(store)
    if known:
        return remembered_concurrency(path, storage, probe, fragment_bytes)
    if start:
        threading.Thread(target=_probe_meanwhile, args=(store, path, probe), daemon=True,
                         name="gpuframe-store-probe").start()
    return unmeasured_concurrency(storage)


def _probe_meanwhile(store: Store, path: str, probe: Probe) -> None:
    """The thread of :func:`concurrency_meanwhile`: the store's probes remembered, or the
    failure logged and the store left unmeasured, so that a later read probes again."""
    try:
        probes, readers, node_readers = probe()
        with _measured_lock:
            _measured.setdefault(store, (tuple(probes), readers, node_readers))
    except Exception as exc:  # noqa: BLE001 (the reads go on unmeasured; the read reports errors)
        logger.warning("measuring the store of %s failed (%s): its reads keep unmeasured "
                       "requests until a later read measures it", path, exc)
    finally:
        with _measured_lock:
            _probing.discard(store)


def unmeasured_concurrency(storage: StorageOptions) -> Concurrency:
    """The concurrency of a read that plans fewer than ``probe_min_bytes`` (the probe reads for
    about a second, far more time and bytes than such a read takes with any sensible setting:
    benchmarks/results/2026-11-25-figures-from-io-comments.md), or of a local read while its
    store's probe runs (:func:`concurrency_meanwhile`).
    :data:`~.model.UNMEASURED_REQUESTS` of ``task_size`` (else
    :data:`~.model.DEFAULT_REQUEST_SIZE`); nothing is remembered, so a larger read still
    probes."""
    return Concurrency(0.0, 0.0, min(UNMEASURED_REQUESTS, storage.max_requests_in_flight),
                       storage.task_size or DEFAULT_REQUEST_SIZE, "unmeasured")


def measure_storage(source: RangeSource, storage: StorageOptions | None = None, probes: int = 3,
                    fragment_bytes: int | None = None) -> Concurrency:
    """Requests in flight and their size for ``source``'s store, measured in this process
    (:func:`probe_storage`, then :func:`choose_concurrency` for one reader); the probe is
    remembered per store (:func:`remembered_concurrency`). A read on a cluster measures on
    its workers instead (:func:`gpuframe.operators.scan.measure_on_workers`)."""
    storage = storage or storage_options()
    return remembered_concurrency(
        source.path, storage, lambda: ([probe_storage(source, storage, probes)], 1, 0),
        fragment_bytes)


