"""The shuffle join: hash-partition each partition's rows per destination worker
(:mod:`~gpuframe.exchange.partition`), send the buckets (:mod:`~gpuframe.exchange.exchange`), and join
them where they land (:mod:`~gpuframe.operators.join`)."""
