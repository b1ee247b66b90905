from gpuframe.diagnostics.stages import STAGES, stage_of

TOKEN = "0123456789abcdef0123456789abcdef"


def test_every_engine_key_names_its_stage():
    keys = {
        f"gpuframe-read-parquet-{TOKEN}-3": "read",
        f"gpuframe-from-pandas-{TOKEN}-0": "load",
        f"gpuframe-from-dask-{TOKEN}-0": "load",
        f"gpuframe-sample-left-{TOKEN}-1": "sample",
        f"gpuframe-partition-left-{TOKEN}-1": "partition",
        f"gpuframe-send-right-{TOKEN}-1-0": "send",
        f"gpuframe-broadcast-{TOKEN}": "broadcast",
        f"gpuframe-join-{TOKEN}-0": "join",
        f"gpuframe-gather-{TOKEN}-0": "gather",
        f"gpuframe-head-{TOKEN}": "gather",
        f"gpuframe-len-{TOKEN}-0": "other",
    }
    assert {key: stage_of(key) for key in keys} == keys
    assert set(keys.values()) <= set(STAGES)


def test_keys_of_others_have_no_stage():
    assert stage_of(f"getitem-{TOKEN}") is None
    assert stage_of(("gpuframe-join-x", 0)) == "join"
    assert stage_of(("getitem-x", 0)) is None
