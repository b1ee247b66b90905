"""Per-partition operators: select, filter, assign, rename, astype and map_partitions.

A chain of them that no other node reads in between (:func:`~.steps.chain_below`) runs as one
task per partition: one pass over the data and one name on the task stream
(``gpuframe-filter-assign-...``). Over a read, the chain runs in the read's own tasks
(:func:`~.scan.lower_scan`); an aggregate above a chain runs it in its own tasks instead of
asking for this one (:mod:`~.groupby`).

Placement survives what does not touch the keys
(:func:`~gpuframe.plan.nodes.placement_after`).
"""

from __future__ import annotations

from ..plan.nodes import Node, Scan
from ..runtime.runner import Partitions
from .lowering import Lowering, lower
from .scan import lower_scan
from .steps import NARROW, apply_steps, chain_below


def lower_chain(node: Node, lowering: Lowering) -> Partitions:
    """``node`` and the per-partition nodes below it that nothing else reads, as one task per
    partition (the read's task, where they are over a read)."""
    chain = chain_below(node, lowering)
    if isinstance(chain.base, Scan) and not lowering.shared(chain.base):
        return lower_scan(chain.base, lowering, chain)
    number = lowering.number(node)
    chain.fused(lowering, node)
    inputs = lowering.input(chain.base)
    futures = lowering.job.stage(chain.name).map(apply_steps, inputs, chain.steps, node=number)
    return Partitions(futures, list(inputs.owners), node.meta,
                      chain.placed(inputs).partitioning)


for _kind in NARROW:
    lower.register(_kind, lower_chain)
