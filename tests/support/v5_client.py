"""Settings the suite gives the official 5.x Python client (``rocketmq-python-client``).

``V5_REQUEST_TIMEOUT``: the client's per-call deadline (seconds; its default is 3). Under the
suite's four workers a QueryRoute to a pure-Python server once took longer than 3 s while JVMs
started beside it, and the SimpleConsumer then failed with "failed to fetch topic ... route". No
test checks that deadline: each checks what the calls answer, so they get room for a loaded machine.
"""

V5_REQUEST_TIMEOUT = 10
