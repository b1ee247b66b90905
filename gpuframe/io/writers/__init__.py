"""Writing datasets from the cluster: the workers write files, the client commits them.

- :mod:`.parquet`: one partition written as Parquet on the worker that holds it, flat or in
  hive folders, and the options of a write, checked;
- :mod:`.commit`: the commit protocol: files staged in a hidden folder, published by the
  store (:class:`~gpuframe.io.storage.base.DatasetStore`) only once every partition's are
  written, with ``_metadata`` and ``_SUCCESS`` beside them; deleted when any failed.

The write action (:mod:`gpuframe.operators.write`) runs these; users call
:func:`gpuframe.writers.write_parquet`.
"""
