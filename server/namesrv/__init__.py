"""The name server of an in-process cluster (``serve --writable --brokers N``): the brokers' routes
merged as ``RouteInfoManager`` merges its brokers' registrations, served on a port of its own."""
