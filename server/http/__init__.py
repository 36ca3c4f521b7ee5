"""The HTTP side of ``serve``: a JSON API over the store, its OpenAPI description and ``/metrics``.

Served on one more port of the same process and event loop as the remoting and gRPC ports
(``server.app``), by aiohttp. Everything here reads the store through ``server.store_api`` (the
calls the remoting processors make), so a lookup on the HTTP port and the same lookup by mqadmin
give the same records. ``lookups`` answers the questions (sans-IO apart from the store reads),
``app`` turns them into routes, errors and exports, ``metrics`` into Prometheus series.
"""

#: The per-topic and per-group series one ``/metrics`` scrape carries at most, by default
#: (``serve --metrics-max-series``): a 100k-topic broker would otherwise make a scrape of ~700k series
#: (100 MB). What the cap leaves out is counted (``rmq_query_metrics_series_dropped_total``).
DEFAULT_MAX_SERIES = 50_000
