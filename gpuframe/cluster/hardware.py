"""What this host offers the engine: GPUs, the GPU libraries, UCX and GPUDirect Storage.

Every probe answers 'absent' rather than failing, so the same calls work on a laptop, a CPU-only
CI runner and a multi-GPU server; :func:`describe_host` gathers them for ``gpuframe info``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_bytes: int


@contextmanager
def _nvml():
    """pynvml, initialised; None where there is no NVML (no driver, or nvidia-ml-py missing)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 (no driver, no library, or a failing one: no NVML)
        yield None
        return
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def list_gpus() -> list[Gpu]:
    """The GPUs NVML sees (all of them, whatever CUDA_VISIBLE_DEVICES says); [] without NVML."""
    with _nvml() as nvml:
        if nvml is None:
            return []
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(Gpu(index, name.decode() if isinstance(name, bytes) else name, memory))
        return gpus


def cuda_driver_version() -> str | None:
    """The CUDA version the driver supports, e.g. '13.0'; None without a driver."""
    with _nvml() as nvml:
        if nvml is None:
            return None
        version = nvml.nvmlSystemGetCudaDriverVersion()
        return f"{version // 1000}.{version % 1000 // 10}"


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def worker_backend_support() -> dict[str, bool]:
    """Run on each worker: can it hold cuDF partitions?"""
    return {"gpu": bool(list_gpus()), "cudf": has_module("cudf")}


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_version(name: str) -> str | None:
    """Version of an importable module, whichever wheel (cu12/cu13) installed it."""
    if not has_module(name):
        return None
    try:
        return getattr(importlib.import_module(name), "__version__", "unknown")
    except Exception as exc:  # noqa: BLE001 (a broken GPU library must not break `info`)
        return f"import failed: {exc}"


def ucx_available() -> bool:
    """Whether Dask can speak UCX here (distributed-ucxx registers the 'ucx' comm)."""
    return has_module("distributed_ucxx")


def gds_status() -> str:
    """How KvikIO will move file bytes to the GPU: GDS, or the bounce buffer (compat mode)."""
    if not has_module("kvikio"):
        return "kvikio not installed"
    try:
        import kvikio.cufile_driver
        import kvikio.defaults

        if kvikio.cufile_driver.get("is_gds_available") and not kvikio.defaults.get("compat_mode"):
            return "GPUDirect Storage"
        return "bounce buffer (KvikIO compat mode: no GDS on this host)"
    except Exception as exc:  # noqa: BLE001 (a failing probe is reported, not raised)
        return f"unknown ({exc})"


def remote_read_status() -> str:
    """How GPU workers fetch remote files' bytes (:func:`gpuframe.io.device.fetch_by_kvikio`)."""
    if has_module("kvikio"):
        try:
            import kvikio

            if kvikio.is_remote_file_available():
                return ("KvikIO RemoteFile (libcurl); gpuframe's own requests for custom "
                        "headers, logins, proxies, S3 profiles")
        except Exception as exc:  # noqa: BLE001 (a failing probe is reported, not raised)
            return f"unknown ({exc})"
    return "gpuframe's own requests through pinned buffers (no KvikIO remote support)"


def native_status() -> str:
    """Whether gpuframe's C++ core was built with CUDA and sees a device."""
    try:
        from gpuframe import _core
    except ImportError as exc:
        return f"not built ({exc})"
    if not _core.built_with_cuda:
        return "CPU only (built without CUDA)"
    return f"CPU + CUDA ({_core.cuda_device_count()} device(s) usable)"


def describe_host() -> dict[str, str]:
    """A flat, printable description of what the engine can use on this host."""
    gpus = list_gpus()
    facts = {
        "GPUs": "; ".join(f"{g.index}: {g.name}, {g.memory_bytes / 2**30:.0f} GiB" for g in gpus)
        or "none",
        "CUDA driver": cuda_driver_version() or "none",
        "UCX (distributed-ucxx)": "available" if ucx_available() else "not installed",
        "file reads to GPU": gds_status(),
        "remote reads to GPU": remote_read_status(),
        "native core": native_status(),
    }
    for module in ("cudf", "dask_cudf", "dask_cuda", "kvikio", "ucxx"):
        facts[module] = module_version(module) or "not installed"
    for distribution in ("gpuframe", "dask", "distributed", "pandas", "pyarrow", "numpy"):
        facts[distribution] = package_version(distribution) or "not installed"
    return facts
