"""What a read task carries survives pickling: each format's metadata as it sends it."""

from __future__ import annotations

import pickle
from dataclasses import fields

import pytest

from gpuframe.io.formats import parquet
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.tasks import fragment_tasks


@pytest.mark.parametrize("format", ["parquet", "orc", "csv"])
def test_a_fragment_task_pickles_whole(dataset_dir, format):
    folder = "flat" if format == "parquet" else format  # flat/: parquet files of orc/'s rows
    plan = plan_fragments(str(dataset_dir / folder), format=format,
                          filters=[("id", ">", 3)], workers=["a", "b"])
    tasks = fragment_tasks(plan)
    restored = pickle.loads(pickle.dumps(tasks))
    for task, copy in zip(tasks, restored):
        assert type(copy.format) is type(task.format)
        for field in fields(task):
            if field.name not in ("format", "metadata"):
                assert getattr(copy, field.name) == getattr(task, field.name), field.name
        if format == "parquet":
            # known to this process, the footer is the planner's own object, undecoded
            assert copy.metadata is task.metadata
        else:
            assert copy.metadata == task.metadata


def test_a_parquet_task_carries_its_footer_as_pyarrow_writes_it(dataset_dir):
    plan = plan_fragments(str(dataset_dir / "flat"))
    task = fragment_tasks(plan)[0]
    _, (buffer,) = task.metadata.__reduce__()
    assert buffer.to_pybytes() in pickle.dumps(task)
    assert parquet.FOOTER_BYTES.footer_of(buffer.to_pybytes()) is task.metadata
