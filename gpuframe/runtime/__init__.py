"""Running plans: the stage runner every operator submits through, and the executor that lowers
an optimized plan to operators."""
