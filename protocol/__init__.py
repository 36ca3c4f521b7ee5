"""RocketMQ bytes, sans-IO: remoting frames and headers, CommitLog message records, ids and index keys.

Nothing in this package opens a socket or a file; the server, the store, the clients and the Spark
pipeline all share it.
"""
