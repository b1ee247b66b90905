"""The join operator: pandas-merge semantics across workers.

The strategy is chosen when the plan runs, from where the inputs' rows are and how large they are:

- **none**: both inputs are already hash-partitioned on the join keys (same hash types, buckets
  and owners): partition ``b`` of each side is joined where both lie, and nothing moves;
- **one side**: one input is hash-partitioned on its keys: the other is hashed into the same
  buckets, sent to their owners, and joined there;
- **broadcast**: one side is small (``broadcast_bytes``, ``broadcast_ratio``, from a sample of
  every partition, or the plan's bounds and estimates): it is gathered by each worker that
  holds partitions of the other, and joined with each where it lies;
- **shuffle**: both sides are hashed on their keys into buckets, ``partitions_per_worker`` per
  worker, each sent to its owner and joined there. Keys too heavy for one worker (found in the
  same sample) are dealt over several (:mod:`~gpuframe.operators.skew`);
- **cross**: no keys to hash on: the smaller side is broadcast, whatever its size.

``validate=`` is checked by the join tasks, each on the rows it holds, so a side whose keys
must be unique is never one whose rows of a key may be spread over several tasks: never the
big side of a broadcast, and never split by heavy keys. ``sort=True`` likewise joins a key's
rows in one task, in input order, so that a stable sort of the gathered rows gives pandas'
order (``DistributedFrame.to_pandas``).

A shuffle's output is hash-partitioned on the preserved side's keys (both sides' for an inner
join), which a later join or groupby on them reuses. Key and result types:
:mod:`~gpuframe.operators.join_schema`.

Memory: partitions, buckets and results are ordinary Dask keys, so the workers' spill buffers move
them out of memory like any other data (to disk past distributed's ``memory_limit`` targets on
the CPU; device to host past dask-cuda's ``device_memory_limit`` on GPUs). One join task's buckets
and output must fit at once, and Dask refuses a task whose inputs exceed its worker's memory
limit, so each worker gets as many join tasks as keep one task's buckets and output within
``join_memory_fraction`` of the smallest worker limit (``partitions_per_worker`` overrides;
:mod:`~.join_decision`). The output is estimated from the key sample, many-to-many fan-out
included (:mod:`~gpuframe.operators.join_size`), which also keeps a side from being broadcast
where each task's output would outgrow that share, and refuses up front, with
:class:`~gpuframe.errors.MemoryLimitError`, a join that surely cannot complete.

Speculation: where the plan's estimates say a join shuffles as it stands, its exchange and
join tasks are submitted with its sample (:func:`_speculated`): its rows leave while the sample
runs, its joins start once a verdict task on a worker has weighed the sample
(:func:`~.join_decision.decide`, the client's own decision), and the client goes on lowering the
plan without waiting for the sample. A side the estimates put well under the copy's cap is
copied with no sample at all (:func:`~.join_copies.copied_by_estimate`), its broadcast task
checking its size. Likewise the join tasks of a side copied without a sample whose keys may
repeat check on their workers that their output fits (:func:`~.join_tasks.join_copied`).
Where a verdict or a check fails, so does the action's job, and the action runs again in a job
that waits for every sample on the client (:func:`~gpuframe.execute.in_job`): a rare cost,
rather than a round trip through the client in every such join.

Fused: a join that copies a side without sampling it, whose other side is made by a join that
nothing else reads (through per-partition nodes), runs in that join's tasks, as a step on each
partition they make, given its worker's copy (:func:`_fused`): a chain of joins with
dimension tables is one task per partition, not one per join. Where the side to copy turns out
hashed on its keys already, the join takes its placement's way instead.

Overlap: a destination fetches each bucket as soon as its source's partition task finishes, so
transfers overlap the partitioning of later partitions. The local join starts once all of its
buckets are in: joining per arriving bucket would rebuild the other side's hash table once per
bucket, and a CPU worker with one thread has no idle time to hide it in.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from distributed import Future

from ..errors import SpeculationError
from ..exchange.exchange import Buckets, Given, exchange
from ..exchange.placement import Contiguous, HashPartitioning
from ..exchange.splitters import HashSplitter, Splitter, cast_keys
from ..plan.explain import copied_by_estimates
from ..plan.nodes import Join, Node
from ..runtime.runner import Job, Partitions, Stage
from ..units import byte_text
from .join_copies import (
    Copy,
    SideCopies,
    all_on,
    copied_unsampled,
    gather_call,
    side_estimates,
)
from .join_decision import (
    SIDES,
    JoinShape,
    broadcast_stands,
    decide,
    speculation_stands,
)
from .join_tasks import (
    CopiedJoinStep,
    LocalJoin,
    join_after,
    join_copied,
    join_gathering,
    join_parts,
)
from .lowering import Lowering, lower
from .skew import SkewSplitter, can_split, profile_sides, sample_sides
from .steps import Chain, chain_ending

SPECULATION_SHARE = 1 / 32
"""The most of the smallest worker memory limit that the plan's estimate of one worker's share
of a side may be for the join to send its rows before its sample returns (:func:`_speculated`):
a send task holds its worker's whole share at once, and the estimate takes a string value at
a fixed width that a side of long strings may outgrow many times over."""


@lower.register
def _(node: Join, lowering: Lowering) -> Partitions:
    return lower_join(node, lowering)


def lower_join(node: Join, lowering: Lowering, chain: Chain | None = None) -> Partitions:
    """``node``'s join; with ``chain`` (per-partition nodes above it that nothing else reads),
    the chain's output, its steps applied in the join's own tasks."""
    if chain is None:
        return _join(node, lowering, lowering.number(node), ())
    chain.fused(lowering, node)
    return chain.placed(_join(node, lowering, lowering.number(chain.top), chain.steps))


def lower_join_partials(node: Join, lowering: Lowering, steps: tuple[Any, ...]) -> Partitions:
    """``node``'s join, each of its tasks handing on what ``steps`` make of its part: the
    partials of the aggregate above (:mod:`~.groupby`), reported as no plan node's output."""
    joined = _join(node, lowering, None, steps)
    decided = lowering.job.notes.get(lowering.number(node), "")
    lowering.note(node, f"{decided}; its tasks also make the partials of the aggregate above")
    return joined


def _join(node: Join, lowering: Lowering, number: int | None, steps: tuple[Any, ...],
          copies: SideCopies | None = None) -> Partitions:
    """The join's tasks, their output reported as plan node ``number``'s (None: not reported),
    after ``steps``, each given its worker's ``copies`` that those steps join with."""
    job = lowering.job
    copies = copies or SideCopies(job)
    keys = {"left": list(node.left_keys), "right": list(node.right_keys)}
    casts = {"left": node.types.left, "right": node.types.right}
    schemas = (cast_keys(node.left.meta, casts["left"]), cast_keys(node.right.meta,
                                                                    casts["right"]))
    hash_types = tuple(str(schemas[0][k].dtype) for k in node.left_keys)
    local = LocalJoin(node.how, node.left_keys, node.right_keys, node.suffixes, node.types,
                      schemas, node.meta, job.backend, node.indicator, node.unique, steps)
    lowered: dict[str, Partitions] = {}
    fused = _fused(node, lowering, number, local, steps, copies, hash_types, lowered)
    if fused is not None:
        return fused
    inputs = {side: lowered[side] if side in lowered else lowering.input(getattr(node, side))
              for side in SIDES}
    placed = {side: _placement_serving(inputs[side], keys[side], hash_types) for side in SIDES}
    left_placed, right_placed = placed["left"], placed["right"]
    if left_placed is not None and right_placed is not None \
            and _same_buckets(left_placed, right_placed):
        lowering.note(node, f"none: both sides already {left_placed.describe()}")
        return _colocated(node, lowering, number, local, inputs, left_placed, copies)
    # On one worker a copied side moves nothing, where sending the other into a hashed side's
    # bucket costs a send task first; on several, that send moves less than a copy to each.
    one_worker = len(job.workers) == 1
    unsampled = copied_unsampled(node, lowering, inputs) if one_worker else None
    for side, other in (("left", "right"), ("right", "left")):
        hashed = placed[side]
        if hashed is not None and unsampled is None:
            lowering.note(node, f"shuffle {other} side only: {side} side already "
                                f"{hashed.describe()}")
            splitter = HashSplitter(tuple(keys[other]), hashed.n, casts[other])
            return _into_buckets(node, lowering, number, local, inputs, side, splitter,
                                 Given(hashed.owners), hash_types, copies)

    if not one_worker:
        unsampled = copied_unsampled(node, lowering, inputs)
    if unsampled is not None:
        return _broadcast(node, lowering, number, local, inputs, *unsampled, copies)
    opts = node.options
    workers = job.workers
    estimates = side_estimates(node)
    # validate= checks each side's keys where all of their rows meet: a side split by heavy
    # keys has them spread over several tasks. sort=True keeps pandas' order of a key's rows
    # by joining them in one task, in input order.
    split = can_split(node.how, opts.skew_threshold, len(workers)) and not any(node.unique) \
        and not node.sort
    shape = JoinShape(node.how, keys, tuple(s for s in SIDES if node.may_copy(s)), split, opts,
                      tuple(workers), {side: len(inputs[side]) for side in SIDES},
                      f"the {node.how} join on {', '.join(keys['left'])} = "
                      f"{', '.join(keys['right'])}")
    samples = sample_sides(job, inputs, keys, casts, opts.skew_sample_rows)
    speculated = _speculated(node, lowering, inputs, shape, samples, local, number, hash_types,
                             estimates, copies)
    if speculated is not None:
        return speculated
    profiles = profile_sides(job, samples)
    job.engine.memory.update({a: m for p in profiles.values() for a, m in p.memory.items()})
    decision = decide(shape, profiles)
    sizes = decision.sizes
    small = decision.broadcast
    if small is not None:
        big = "left" if small == "right" else "right"
        lowering.note(node, f"cross: broadcast {small} side ({byte_text(sizes[small])} sampled)"
                      if node.how == "cross" else
                      f"broadcast {small} side ({byte_text(sizes[small])} sampled, {big} "
                      f"{byte_text(sizes[big])})")
        return _broadcast(node, lowering, number, local, inputs, small, Copy(), copies)
    assert decision.output is not None
    skew, per_worker = decision.skew, decision.per_worker
    lowering.note(node, f"shuffle: {len(workers)} workers x {per_worker} join tasks"
                        + (", heavy keys split" if skew else "")
                        + f" (output about {byte_text(decision.output.nbytes)} estimated)")
    n = len(workers) * per_worker
    splitters: dict[str, Splitter] = {}
    for side, by_hash in _hash_splitters(keys, casts, n).items():
        side_skew = getattr(skew, side) if skew else None
        splitters[side] = SkewSplitter(by_hash, side_skew, job.backend) if side_skew \
            else by_hash
    buckets = {side: exchange(job, inputs[side], splitters[side], Contiguous(), side,
                              decision.batches[side])
               for side in SIDES}
    return _shuffle_joins(node, job, number, local, buckets, hash_types, skew is None, copies)


def _shuffle_joins(node: Join, job: Job, number: int | None, local: LocalJoin,
                   buckets: dict[str, Buckets], hash_types: tuple[str, ...], placed: bool,
                   copies: SideCopies, verdict: Future | None = None) -> Partitions:
    """The join task of each bucket, on its owner; with ``verdict``, each joins once it has
    passed (:func:`~.join_tasks.join_after`). ``placed``: the output is hash-partitioned on the
    keys (no key split over several tasks)."""
    owners = buckets["left"].owners
    stage = job.stage("join")
    call = (join_parts, (local,)) if verdict is None else (join_after, (verdict, local))
    futures = [_join_task(stage, call, buckets["left"].parts[b], buckets["right"].parts[b],
                          b, owner, number, copies, alone)
               for b, (owner, alone) in enumerate(zip(owners, _alone(owners)))]
    placement = _output_placement(node, hash_types, len(owners), owners) if placed else None
    return Partitions(futures, owners, node.meta, placement)


class _QuietSpeculation(logging.Filter):
    """Keeps a failed speculation (:class:`~gpuframe.errors.SpeculationError`), a turn its
    action recovers from by running again, out of its worker's error log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (str(record.msg).startswith("Compute Failed")
                    and any("SpeculationError(" in str(arg) for arg in args))


# On import, in every process that runs a join's tasks; the filter is idle in the others.
logging.getLogger("distributed.worker").addFilter(_QuietSpeculation())


Call = tuple[Callable[..., Any], tuple[Any, ...]]
"""A function and its leading arguments."""


def _join_task(stage: Stage, call: Call, left: list[Any], right: list[Any], index: int,
               owner: str, number: int | None, copies: SideCopies, alone: bool,
               side: tuple[str, Call] | None = None) -> Future:
    """The join task of output partition ``index`` on ``owner``: ``call``'s function
    (:func:`~.join_tasks.join_parts`, :func:`~.join_tasks.join_after` or
    :func:`~.join_tasks.join_copied`) on its leading arguments, the parts of each side it
    takes and ``owner``'s ``copies``. Where it is ``alone`` (its worker's only task of the join)
    and the copies' parts all lie there, it gathers them itself, as it does a ``side`` copied
    to it where given (the side, and what gathers it): :func:`~.join_tasks.join_gathering`."""
    fn, head = call
    inline = alone and copies.lie_on(owner)
    if side is None and not inline:
        return stage.submit(fn, *head, left, right, copies.on(owner), index=(index,),
                            owner=owner, node=number)
    copied, gather = side if side is not None else (None, None)
    return stage.submit(join_gathering, fn, copied, gather,
                        list(copies.calls) if inline else None, *head, left, right,
                        None if inline else copies.on(owner), index=(index,), owner=owner,
                        node=number)


def _alone(owners: Sequence[str]) -> list[bool]:
    """For each task of ``owners``, whether it is its worker's only one."""
    counts = Counter(owners)
    return [counts[owner] == 1 for owner in owners]


def speculation_verdict(shape: JoinShape, per_worker: int, *sampled: Any) -> bool:
    """The verdict task of a speculative shuffle, on a worker: true where the join's sample
    decides the shuffle it made (:func:`~.join_decision.speculation_stands`); else
    :class:`~gpuframe.errors.SpeculationError`, which fails the job, and the action runs again
    in one that decides from the sample on the client."""
    if not speculation_stands(shape, per_worker, *sampled):
        raise SpeculationError(f"{shape.name}: its sample chose otherwise than the shuffle of "
                               f"{per_worker} join task(s) a worker its estimates sent")
    return True


def _speculated(node: Join, lowering: Lowering, inputs: dict[str, Partitions],
                shape: JoinShape, samples: dict[str, list[Future]], local: LocalJoin,
                number: int | None, hash_types: tuple[str, ...],
                sizes: dict[str, float | None], copies: SideCopies) -> Partitions | None:
    """The join the plan's estimates of its sides' bytes (``sizes``,
    :func:`~gpuframe.plan.explain.estimated`) choose, submitted with the sample, and the client
    goes on lowering the plan without waiting for the sample at all: a round trip through the
    client, the longest wait between a join's stages, taken off every such join.

    - A side the estimates copy to every worker is gathered once a verdict task on a worker
      has found, from the sample, that it may be (:func:`broadcast_verdict`).
    - Else the shuffle as it stands: ``partitions_per_worker`` (else one) join tasks a worker,
      no key split, a worker's share of a side in one send task. Its rows leave while the
      samples run, and its join tasks start once a verdict task has weighed the sample as the
      client would (:func:`speculation_verdict`).

    Where the sample chooses otherwise, the verdict fails the job and the action runs again,
    deciding from the sample on the client. None where the job does not speculate, or the
    estimates cannot say: before any sample has told the workers' memory limits, for a side
    without an estimate, and for a shuffle where a worker's estimated share of a side exceeds
    :data:`SPECULATION_SHARE` of the smallest limit."""
    job = lowering.job
    if node.how == "cross" or not job.speculates:
        return None
    known = [job.engine.memory.get(worker) for worker in job.workers]
    limits = [memory.limit for memory in known if memory is not None and memory.limit]
    if len(limits) < len(job.workers):
        return None
    left, right = sizes["left"], sizes["right"]
    if left is None or right is None:
        return None
    workers = len(job.workers)
    copied = copied_by_estimates(node, sizes, workers)
    if copied is not None:
        verdict = job.stage("verdict").submit(broadcast_verdict, shape, copied,
                                              *samples["left"], *samples["right"], index=(0,),
                                              priority=1)
        lowering.note(node, f"broadcast {copied} side (copied once its sample, weighed on a "
                            "worker, allows it)")
        return _broadcast(node, lowering, number, local, inputs, copied, Copy(verdict), copies)
    if max(left, right) / workers > SPECULATION_SHARE * min(limits):
        return None
    per_worker = node.options.partitions_per_worker or 1
    casts = {"left": local.types.left, "right": local.types.right}
    splitters = _hash_splitters(shape.keys, casts, workers * per_worker)
    buckets = {side: exchange(job, inputs[side], splitters[side], Contiguous(), side)
               for side in SIDES}
    verdict = job.stage("verdict").submit(speculation_verdict, shape, per_worker,
                                          *samples["left"], *samples["right"], index=(0,),
                                          priority=1)
    lowering.note(node, f"shuffle: {workers} workers x {per_worker} join tasks, rows sent and "
                        "joined while sampling (the sample weighed on a worker)")
    return _shuffle_joins(node, job, number, local, buckets, hash_types, True, copies, verdict)


def broadcast_verdict(shape: JoinShape, copied: str, *sampled: Any) -> bool:
    """The verdict task of a speculative broadcast, on a worker: true where the join's sample
    lets the ``copied`` side be copied to every worker (:func:`~.join_decision.broadcast_stands`);
    else :class:`~gpuframe.errors.SpeculationError`, before any of it is gathered."""
    if not broadcast_stands(shape, copied, *sampled):
        raise SpeculationError(f"{shape.name}: its sample found the {copied} side too large to "
                               "copy to every worker, as its estimates had it")
    return True


def _join_below(node: Node, lowering: Lowering) -> tuple[Join, Chain | None] | None:
    """The join whose tasks make ``node``'s partitions, where nothing else reads them:
    ``node`` itself, or the base of the per-partition chain that ends at it, with that chain.
    None where no such join does."""
    chain = chain_ending(node, lowering)
    base = chain.base if chain is not None else node
    if isinstance(base, Join) and not lowering.shared(base):
        return base, chain
    return None


def _fused(node: Join, lowering: Lowering, number: int | None, local: LocalJoin,
           steps: tuple[Any, ...], copies: SideCopies, hash_types: tuple[str, ...],
           lowered: dict[str, Partitions]) -> Partitions | None:
    """Where ``node`` copies a side to every worker without sampling
    (:func:`~.join_copies.copied_unsampled`) and its other side is made by a join that nothing
    else reads (through per-partition nodes, :func:`_join_below`): that join's tasks run this
    one as well, as a step on each partition they make
    (:class:`~.join_tasks.CopiedJoinStep`) with their worker's copy. A join task fewer per
    partition: a round trip through the scheduler, and the wait for a worker's
    thread, off the path of each partition. None elsewhere, and where the side to copy turns
    out hashed on its keys already (the other side is then sent into its buckets): that side,
    lowered, is left in ``lowered``."""
    if not node.options.fuse_copies:
        return None
    below = {side: _join_below(getattr(node, side), lowering) for side in SIDES}
    if not any(below.values()):
        return None
    decided = copied_unsampled(node, lowering)
    if decided is None:
        return None
    small, copy = decided
    big = "left" if small == "right" else "right"
    found = below[big]
    if found is None:
        return None
    base, chain = found
    small_parts = lowered[small] = lowering.input(getattr(node, small))
    small_keys = list(node.left_keys if small == "left" else node.right_keys)
    if _placement_serving(small_parts, small_keys, hash_types) is not None:
        return None
    fraction = node.options.join_memory_fraction
    step = CopiedJoinStep(replace(local, steps=()), small, len(copies.calls), fraction)
    gather = gather_call(lowering.job, small_parts, local, small, copy, fraction)
    if chain is not None:
        chain.fused(lowering, base)
    lowering.note(node, f"{lowering.job.notes[lowering.number(node)]}, joined in the tasks of "
                        f"#{lowering.number(base)}")
    parts = _join(base, lowering, number, (chain.steps if chain is not None else ())
                  + (step,) + steps, copies.plus(gather, small_parts))
    placed = chain.placed(parts).partitioning if chain is not None else parts.partitioning
    placement = None if placed is None else _output_placement(
        node, placed.hash_types, placed.n, placed.owners, side=big, keys=placed.keys)
    return Partitions(parts.futures, parts.owners, node.meta, placement)


def _hash_splitters(keys: dict[str, list[str]], casts: dict[str, dict[str, Any]], n: int
                    ) -> dict[str, HashSplitter]:
    """Each side's rows hashed on its keys into ``n`` buckets: one maker for the speculative
    exchange and the one the sample decides, so that the first may stand for the second."""
    return {side: HashSplitter(tuple(keys[side]), n, casts[side]) for side in SIDES}


def _placement_serving(parts: Partitions, keys: list[str], hash_types: tuple[str, ...]
                       ) -> HashPartitioning | None:
    """``parts``' placement where it already puts equal ``keys`` (as ``hash_types``) together."""
    placed = parts.partitioning
    return placed if placed is not None and placed.serves(keys, hash_types) else None


def _same_buckets(a: HashPartitioning, b: HashPartitioning) -> bool:
    return a.n == b.n and a.owners == b.owners


def _colocated(node: Join, lowering: Lowering, number: int | None, local: LocalJoin,
               inputs: dict[str, Partitions], placed: HashPartitioning, copies: SideCopies
               ) -> Partitions:
    """Both sides hashed alike: partition ``b`` of each joined where both lie."""
    stage = lowering.job.stage("join")
    left, right = inputs["left"], inputs["right"]
    futures = [_join_task(stage, (join_parts, (local,)), [lf], [rf], b, owner, number, copies,
                          alone)
               for b, (lf, rf, owner, alone) in enumerate(zip(
                   left.futures, right.futures, left.owners, _alone(left.owners)))]
    placement = _output_placement(node, placed.hash_types, placed.n, placed.owners)
    return Partitions(futures, list(left.owners), node.meta, placement)


def _into_buckets(node: Join, lowering: Lowering, number: int | None, local: LocalJoin,
                  inputs: dict[str, Partitions], placed_side: str, splitter: Splitter,
                  placed_owners: Given, hash_types: tuple[str, ...], copies: SideCopies
                  ) -> Partitions:
    """One side hashed already: the other sent into its buckets, and each bucket joined with
    the partition that holds it."""
    job = lowering.job
    other = "right" if placed_side == "left" else "left"
    buckets = exchange(job, inputs[other], splitter, placed_owners, other)
    owners = buckets.owners
    stage = job.stage("join")
    futures = []
    for b, (part, owner, alone) in enumerate(zip(inputs[placed_side].futures, owners,
                                                 _alone(owners))):
        sides = {placed_side: [part], other: buckets.parts[b]}
        futures.append(_join_task(stage, (join_parts, (local,)), sides["left"], sides["right"],
                                  b, owner, number, copies, alone))
    placement = _output_placement(node, hash_types, len(owners), owners)
    return Partitions(futures, owners, node.meta, placement)


def _broadcast(node: Join, lowering: Lowering, number: int | None, local: LocalJoin,
               inputs: dict[str, Partitions], small: str, copy: Copy, copies: SideCopies
               ) -> Partitions:
    """The ``small`` side gathered on every worker that holds a partition of the other side,
    as ``copy`` says, and each such partition joined with it where it lies. Each worker
    fetches the small side's parts itself: gathered on one worker and copied from there, the
    side's rows would cross two hops one after the other, each a round trip through the
    scheduler and a wait for the worker holding them to serve it between tasks. Where
    ``copy.counted_on`` (a side copied without a sample whose keys may repeat), each join task
    first checks on its worker that its output fits (:func:`~.join_tasks.join_copied`): the
    client never waits for that check. A worker's only join task, where the side's parts all
    lie on its worker (one worker, or one part beside it), gathers the side itself: a broadcast
    task there would move nothing and cost a round trip through the scheduler."""
    job = lowering.job
    big = "left" if small == "right" else "right"
    fraction = node.options.join_memory_fraction
    gather = gather_call(job, inputs[small], local, small, copy, fraction)
    holders = set(inputs[small].owners)
    call = (join_parts, (local,)) if copy.counted_on is None \
        else (join_copied, (local, small, fraction))
    gathered: dict[str, Future] = {}
    stage = job.stage("join")
    futures = []
    for i, (part, owner, alone) in enumerate(zip(inputs[big].futures, inputs[big].owners,
                                                 _alone(inputs[big].owners))):
        sides: dict[str, list[Any]] = {big: [part], small: []}
        side = None
        if alone and all_on(holders, owner):
            side = (small, gather)
        else:
            if owner not in gathered:
                gathered[owner] = job.stage("broadcast").submit(
                    gather[0], *gather[1], index=(len(gathered),), owner=owner)
            sides[small] = [gathered[owner]]
        futures.append(_join_task(stage, call, sides["left"], sides["right"], i, owner, number,
                                  copies, alone, side))
    placed = inputs[big].partitioning
    placement = None
    if placed is not None:
        placement = _output_placement(node, placed.hash_types, placed.n, placed.owners,
                                      side=big, keys=placed.keys)
    return Partitions(futures, list(inputs[big].owners), node.meta, placement)


def _output_placement(node: Join, hash_types: Sequence[str], n: int, owners: Sequence[str],
                      side: str | None = None, keys: Sequence[str] | None = None
                      ) -> HashPartitioning | None:
    """Where the join's output rows are: hashed on the output names of the keys of the side
    whose rows stay where they were placed (``side``; by default the side the join type
    preserves, either for an inner join)."""
    if side is None:
        side = "right" if node.how in ("right", "right_anti") else "left"
        if node.how == "outer" and node.left_keys != node.right_keys:
            return None
    if keys is None:
        keys = node.left_keys if side == "left" else node.right_keys
    names = {source: name for name, source in node.sources().items()}
    out = [names.get((side, key)) for key in keys]
    if None in out:
        return None
    return HashPartitioning(tuple(out), tuple(hash_types), n, tuple(owners))  # type: ignore[arg-type]


