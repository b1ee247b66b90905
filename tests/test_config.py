import pytest

from gpuframe.config import ClusterOptions, describe, resolve
from gpuframe.errors import OptionError


def test_defaults_come_from_the_class():
    options = resolve(ClusterOptions, environ={})
    assert options == ClusterOptions()
    assert options.dashboard_address.startswith("127.0.0.1:")


def test_environment_overrides_defaults_and_calls_override_environment():
    environ = {"GPUFRAME_N_WORKERS": "3", "GPUFRAME_PROTOCOL": "tcp",
               "GPUFRAME_RMM_POOL_SIZE": "40GB", "GPUFRAME_DEVICE_MEMORY_LIMIT": "0.5"}
    options = resolve(ClusterOptions, environ=environ)
    assert (options.n_workers, options.protocol) == (3, "tcp")
    assert options.rmm_pool_size == "40GB"
    assert options.device_memory_limit == 0.5
    assert resolve(ClusterOptions, {"n_workers": 5}, environ=environ).n_workers == 5


def test_none_in_the_environment_clears_an_option():
    assert resolve(ClusterOptions, environ={"GPUFRAME_RMM_POOL_SIZE": "none"}).rmm_pool_size is None


def test_unknown_option_is_named():
    with pytest.raises(OptionError, match="'n_wrokers'.*n_workers"):
        resolve(ClusterOptions, {"n_wrokers": 2}, environ={})


def test_bad_environment_value_names_the_variable():
    with pytest.raises(OptionError, match="GPUFRAME_N_WORKERS='many'"):
        resolve(ClusterOptions, environ={"GPUFRAME_N_WORKERS": "many"})


def test_every_option_is_described():
    described = describe(ClusterOptions)
    assert [name for name, _, _ in described][:2] == ["backend", "protocol"]
    assert all(meaning for _, _, meaning in described)


def test_engine_defaults_replace_the_class_defaults_below_the_environment_and_calls():
    from gpuframe.config import JoinOptions

    engine = {"broadcast_bytes": 2**31}
    assert resolve(JoinOptions, environ={}, defaults=engine).broadcast_bytes == 2**31
    environ = {"GPUFRAME_BROADCAST_BYTES": "1000"}
    assert resolve(JoinOptions, environ=environ, defaults=engine).broadcast_bytes == 1000
    assert resolve(JoinOptions, {"broadcast_bytes": 7}, environ=environ,
                   defaults=engine).broadcast_bytes == 7
