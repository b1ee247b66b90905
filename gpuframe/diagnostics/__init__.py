"""What the engine did and how fast, one job at a time.

- :mod:`~gpuframe.diagnostics.stages`: the job protocol (task keys, job ids, events) that the
  engine follows and everything here reads; it imports nothing of the engine, so any layer may.
- :mod:`~gpuframe.diagnostics.metrics`: the scheduler plugin that records each job's tasks.
- :mod:`~gpuframe.diagnostics.page` and :mod:`~gpuframe.diagnostics.figures`: the engine page of
  the dashboard.
- :mod:`~gpuframe.diagnostics.limits`: hardware limits measured on the workers.
- :mod:`~gpuframe.diagnostics.attach`: the plugin and limits given to a cluster at bring-up.
- :mod:`~gpuframe.diagnostics.jobs`, :mod:`~gpuframe.diagnostics.report` and
  :mod:`~gpuframe.diagnostics.progress`: a job's figures, reports and progress bars, on the client.

This package imports nothing, so importing one of its modules pulls in only that module's needs.
"""
