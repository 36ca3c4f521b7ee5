"""The environment the tests run the official 4.9.7 ``mqadmin`` in: its timeouts keep the channel open.

Under CPU load (the suite's four xdist workers on two cores) mqadmin sometimes failed with
``RemotingSendRequestException: send request to <127.0.0.1:PORT> failed`` and no cause. That was not
our server closing anything: the client did it to itself. Every 4.9.7 client instance starts a
scheduled route refresh 10 ms after start (``MQClientInstance.startScheduledTask``), and the admin
tool's instance holds the inner producer's ``TBW102``, so that refresh asks the name server for a
route on the very channel the command's own lookup uses. Its budget is 3000 ms including the time the
starved JVM spends creating the channel; when it runs out, ``NettyRemotingClient.invokeSync`` closes
the channel because ``clientCloseSocketIfTimeout`` is on by default, and closing a channel fails every
request pending on it at once (``failFast``: ``sendRequestOK=false``, no cause), so the command's own
lookup, answered or not yet, becomes that exception. mqadmin's ``logs/client/rocketmq_client.log``
shows the sequence: "invokeSync: close socket because of timeout, 3000ms, null" from the refresh
thread, then "send request exception, so close the channel" from the command.

4.9.7 reads the switch from the system property ``com.rocketmq.remoting.client.closeSocketIfTimeout``
(``NettySystemConfig``); ``bin/mqadmin`` rebuilds its JVM flags from ``_env.sh``, so the property goes
in through ``JDK_JAVA_OPTIONS``, which every JDK 9+ launcher reads (it notes so on stderr: "Picked up
JDK_JAVA_OPTIONS"). The command's own request keeps its own timeout; only the background refresh's
timeout no longer takes the command's channel down with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: The JVM flag: a request that times out does not close the channel the other requests share.
KEEP_CHANNEL_ON_TIMEOUT = "-Dcom.rocketmq.remoting.client.closeSocketIfTimeout=false"


def mqadmin_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the flag added to ``JDK_JAVA_OPTIONS``."""
    env = dict(os.environ if base is None else base)
    env["JDK_JAVA_OPTIONS"] = f"{env.get('JDK_JAVA_OPTIONS', '')} {KEEP_CHANNEL_ON_TIMEOUT}".strip()
    return env
