from gpuframe.units import byte_text


def test_sizes_read_in_the_largest_unit_below_1024_of_them():
    assert byte_text(0) == "0 B"
    assert byte_text(1023) == "1023 B"
    assert byte_text(1024) == "1.0 KiB"
    assert byte_text(1.5 * 2**20) == "1.5 MiB"
    assert byte_text(2**30 - 1) == "1024.0 MiB"
    assert byte_text(3 * 2**40) == "3072.0 GiB"
