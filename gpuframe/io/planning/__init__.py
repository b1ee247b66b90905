"""Planning a read on the client, before any task runs.

- :mod:`.sources`: the dataset's files, and each file's hive values;
- :mod:`.metadata`: each file's metadata, read through a callback (here or on the workers) and
  kept for later plans while the file is unchanged;
- :mod:`.plan`: :func:`~.plan.plan_fragments`: pruning, packing units into fragments, placing
  fragments on workers, and grouping them into read groups (:class:`~.plan.ReadPlan`).
"""
