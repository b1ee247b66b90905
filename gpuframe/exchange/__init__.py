"""The exchange: rows moved between workers. Splitters cut each partition into buckets
(:mod:`~gpuframe.exchange.splitters`, packed by gpuframe's native core in
:mod:`~gpuframe.exchange.pack`), owner policies say which worker each bucket goes to
(:mod:`~gpuframe.exchange.placement`), and :mod:`~gpuframe.exchange.exchange` runs the stages that
send them (:mod:`~gpuframe.exchange.bucket`: how a bucket travels)."""
