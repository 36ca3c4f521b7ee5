"""The ``rmq-query`` subcommands of the clients package: query-key, query-id, query-uniq and bench."""
