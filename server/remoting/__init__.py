"""The remoting front door: connections, framing, request dispatch, the processors of each request code."""
