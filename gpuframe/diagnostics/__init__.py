"""What the engine did and how fast: the metrics plugin on the scheduler, the engine page of the
dashboard, job reports and progress bars.

Lower layers never import this package: io and shuffle name their task keys by stage
(:mod:`gpuframe.diagnostics.stages`) and the scheduler plugin reads everything else from Dask.
"""

from .jobs import JobMetrics, job_metrics
from .limits import HardwareLimits, measure_limits
from .progress import progress
from .report import ReportError, report

__all__ = ["HardwareLimits", "JobMetrics", "ReportError", "job_metrics", "measure_limits",
           "progress", "report"]
