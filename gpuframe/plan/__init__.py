"""The logical plan: column expressions, plan nodes with their schemas, the optimizer, and
``explain()``."""
