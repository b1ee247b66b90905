"""A CUDA stream of its own for each thread that decodes files on the GPU.

cuDF's calls run on the device's legacy default stream, which puts every thread's kernels in
one line: reads on several worker threads take as long as one after the other. Reads on
streams of their own overlap (benchmarks/results/2026-11-28-s33-gpus-h100x2.md). A stream here
is never destroyed: what a read allocates on it is freed on it, whenever its frame goes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmm.pylibrmm.stream import Stream

_streams: dict[int, Stream] = {}
_lock = threading.Lock()


def thread_stream() -> Stream:
    """The calling thread's stream, made on its first use. Non-blocking: it neither waits for
    the legacy default stream's work nor holds it up, so the caller synchronizes it before
    handing on what it made, and gives it only inputs already complete (files, or device
    copies that a synchronous copy filled)."""
    ident = threading.get_ident()
    with _lock:
        stream = _streams.get(ident)
        if stream is None:
            from rmm.pylibrmm.stream import CudaStreamFlags, Stream

            stream = _streams[ident] = Stream(flags=CudaStreamFlags.NON_BLOCKING)
    return stream
