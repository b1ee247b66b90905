"""The shuffle join: hash-partition each partition's rows per destination worker
(:mod:`~gpuframe.shuffle.partition`), send the buckets (:mod:`~gpuframe.shuffle.exchange`), and join
them where they land (:mod:`~gpuframe.shuffle.join`)."""
