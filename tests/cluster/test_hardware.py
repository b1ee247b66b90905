from gpuframe.cluster import hardware


def test_describe_host_reports_every_fact_even_without_gpus():
    facts = hardware.describe_host()
    for key in ("GPUs", "CUDA driver", "UCX (distributed-ucxx)", "file reads to GPU",
                "remote reads to GPU", "native core", "cudf", "dask", "pandas"):
        assert facts[key], key
    assert facts["dask"] == hardware.package_version("dask")
    assert facts["remote reads to GPU"].startswith(
        "KvikIO RemoteFile" if hardware.has_module("kvikio") else "gpuframe's own requests")


def test_gpu_list_matches_the_nvml_count():
    gpus = hardware.list_gpus()
    assert [g.index for g in gpus] == list(range(len(gpus)))
    assert all(g.memory_bytes > 0 for g in gpus)


def test_native_core_is_built_and_reports_cuda_honestly():
    from gpuframe import _core

    status = hardware.native_status()
    assert status.startswith("CPU + CUDA") == bool(_core.built_with_cuda)
    if not hardware.list_gpus():
        assert _core.cuda_device_count() == 0
