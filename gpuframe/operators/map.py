"""Per-partition operators: select, filter, assign, rename, astype and map_partitions.

A chain of them that no other node reads in between (:func:`~.steps.chain_below`) runs as one
task per partition: one pass over the data and one name on the task stream
(``gpuframe-filter-assign-...``). Over a read, a join or an aggregate, the chain runs in that
operator's own (last) tasks (:func:`~.scan.lower_scan`, :func:`~.join.lower_join`,
:func:`~.groupby.lower_groupby`); an aggregate above a chain runs it in its own tasks instead of
asking for this one (:mod:`~.groupby`).

Placement survives what does not touch the keys
(:func:`~gpuframe.plan.nodes.placement_after`).
"""

from __future__ import annotations

from ..plan.aggregate import GroupBy
from ..plan.nodes import Join, Node, Scan
from ..runtime.runner import Partitions
from .groupby import lower_groupby
from .join import lower_join
from .lowering import Lowering, lower
from .scan import lower_scan
from .steps import NARROW, apply_steps, chain_below


def lower_chain(node: Node, lowering: Lowering) -> Partitions:
    """``node`` and the per-partition nodes below it that nothing else reads, as one task per
    partition: the task of the read, join or aggregate below them, where they are over one."""
    chain = chain_below(node, lowering)
    if not lowering.shared(chain.base):
        if isinstance(chain.base, Scan):
            return lower_scan(chain.base, lowering, chain)
        if isinstance(chain.base, Join):
            return lower_join(chain.base, lowering, chain)
        if isinstance(chain.base, GroupBy):
            return lower_groupby(chain.base, lowering, chain)
    number = lowering.number(node)
    chain.fused(lowering, node)
    inputs = lowering.input(chain.base)
    futures = lowering.job.stage(chain.name).map(apply_steps, inputs, chain.steps, node=number)
    return chain.placed(inputs, futures)


for _kind in NARROW:
    lower.register(_kind, lower_chain)
