"""Reading fragments on the workers, one read group a task.

- :mod:`.base`: what a reader offers (:class:`~.base.Reader`) and reports
  (:class:`~.base.ReadStats`);
- :mod:`.arrow`: the pandas backend's reader, pyarrow over a :mod:`.fetch` fetcher per file;
- :mod:`.cudf`: the cudf backend's reader, cuDF over local files or over copies of remote files
  in device memory (:mod:`.device`);
- :mod:`.failures`: decoding errors named as the engine's errors, file and unit;
- :mod:`.task`: the read task itself, :func:`~.task.read_group`, and its stats kept for the
  client's report.
"""
