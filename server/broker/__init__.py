"""The broker's rules, sans-IO, between the store and the server's sockets: what a request does to the
store."""
