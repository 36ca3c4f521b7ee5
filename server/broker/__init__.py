"""The broker's rules: what a request does to the store, sans-IO, between the store and the sockets.

What a SEND stores and answers (``send_check``: the checks before anything is stored;
``put_message``: the records, and the store's own refusals), the store the write path appends to
(``writable_store``: writer, topic table, dispatch to the index) and scheduled delivery's decisions
(``scheduled_delivery``). Groups, offsets, retries and transactions come here next.

The rule (``tests/test_layers.py``): this package imports ``protocol``, ``store`` and itself only:
no sockets, no asyncio, nothing else of ``server``. So the broker's behaviour is checked against
the records and answers of the real 4.9.7 broker without a connection, and the server above it
(processors, timers, the event loop) decides nothing a broker decides: it decodes, calls in here
and answers.
"""
