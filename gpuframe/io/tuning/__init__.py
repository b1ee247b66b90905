"""How many requests to keep in flight to a store, and how large: measured, then Little's law.

- :mod:`.probe`: a store measured where its reads will run: latency, one request's rate alone,
  and what 2, 4, 8... reads at once get, up to the knee where more stop paying;
- :mod:`.model`: from those, requests large enough that latency is a small part of each, and
  enough of them in flight to cover the store's bandwidth times the time each request takes
  while the store delivers it (Little's law), fitted to the ranges a read fetches;
- :mod:`.stores`: probes remembered per store and process; the choice made for each read;
- :mod:`.budget`: one budget of requests in flight per store for a whole host, whose tokens
  the requests of its every worker process take.
"""
