"""The Python client, the ``rmq-query`` command line and the load generator."""
