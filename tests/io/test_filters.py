"""``filters=`` checked against a dataset's schema: each bad term named."""

from __future__ import annotations

import pytest

from gpuframe.io.errors import (
    FilterError,
)
from gpuframe.io.planning.plan import (
    plan_fragments,
)

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


@pytest.mark.parametrize("filters, message", [
    ([("id", "~", 1)], r"\('id', '~', 1\): unknown operator '~'"),
    ([("nope", "==", 1)], r"names column 'nope', which is not in"),
    ([("id", ">", "abc")], r"value 'abc' does not fit column 'id' of type int64"),
    ([("name", "==", 3)], r"value 3 does not fit column 'name' of type string"),
    ([("id", "in", 5)], r"'in' needs a list"),
    ([("id", "==")], r"\('id', '=='\) is not a \(column, op, value\) tuple"),
    ("id > 5", r"must be a non-empty list"),
    ([], r"must be a non-empty list"),
    ([[("id", "==", 1)], []], r"is not a non-empty list"),
])
def test_bad_filters_name_the_term(dataset_dir, filters, message):
    with pytest.raises(FilterError, match=message):
        plan_fragments(str(dataset_dir / "flat"), filters=filters)
