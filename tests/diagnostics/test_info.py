from gpuframe.cli import main
from gpuframe.cluster.hardware import list_gpus


def test_info_prints_the_measured_limits(capsys):
    assert main(["info"]) == 0
    lines = dict(line.split("  ", 1) for line in capsys.readouterr().out.splitlines())
    facts = {key.strip(): value.strip() for key, value in lines.items()}
    assert facts["measured memcpy"].endswith("GB/s")
    assert facts["measured disk read"].split()[1] == "GB/s"
    if not list_gpus():
        assert facts["measured device copy"].startswith("n/a (no GPU")
