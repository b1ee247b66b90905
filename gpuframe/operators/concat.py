"""The concatenation operator: the inputs' partitions in order, nothing moved.

An input whose schema is the output's passes its partitions through as they are (no task);
another's partitions are conformed where they lie: the columns it lacks added as missing, and
every column cast to the output's type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from distributed import Future

from ..backend import get_backend
from ..plan.concat import Concat
from ..runtime.runner import Partitions
from ..sent_schemas import SendsSchemas
from .lowering import Lowering, lower


@dataclass(frozen=True)
class Conform(SendsSchemas):
    """Gives a partition the concatenation's schema ``meta``."""

    meta: pd.DataFrame
    backend: str

    def __call__(self, part: Any) -> Any:
        frame = part.reindex(columns=list(self.meta.columns))
        return get_backend(self.backend).astype(frame, list(self.meta.dtypes))


def conform_partition(part: Any, conform: Conform) -> Any:
    return conform(part)


def same_schema(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return list(a.columns) == list(b.columns) and list(a.dtypes) == list(b.dtypes)


@lower.register
def _(node: Concat, lowering: Lowering) -> Partitions:
    futures: list[Future] = []
    owners: list[str] = []
    conform = Conform(node.meta, lowering.job.backend)
    conformed = 0
    for child in node.inputs:
        parts = lowering.input(child)
        if same_schema(child.meta, node.meta):
            futures.extend(parts.futures)
        else:
            conformed += 1
            stage = lowering.job.stage("conform")
            futures.extend(stage.map(conform_partition, parts, conform,
                                     node=lowering.number(node)))
        owners.extend(parts.owners)
    lowering.note(node, f"{len(futures)} partitions from {len(node.inputs)} inputs, "
                        f"{conformed} conformed to the schema")
    return Partitions(futures, owners, node.meta)
