import os
import subprocess
import sys

import pytest

from gpuframe.cli import main


def test_info_prints_the_host_facts(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "GPUs" in out and "native core" in out and "distributed" in out


def test_demo_command_runs_end_to_end():
    env = dict(os.environ, PYTHONWARNINGS="default")
    done = subprocess.run(
        [sys.executable, "-m", "gpuframe.cli", "demo", "--rows", "20000", "--n-workers", "2",
         "--protocol", "tcp", "--dashboard-address", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=240, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "check against pandas: OK" in done.stdout
    assert "dashboard: http://127.0.0.1:" in done.stdout
    assert "joined 20,000 orders" in done.stdout


def test_bad_cli_option_exits_with_the_message(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--protocol"])
    assert "--protocol" in capsys.readouterr().err
