"""The asyncio RemotingCommand server that wires sockets to the query processors."""
