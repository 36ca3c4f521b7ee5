"""The Settings the Proxy answers on a client's Telemetry stream, sans-IO.

A 5.x client opens Telemetry, writes its own ``Settings`` and waits (10 s in the Python client) for
the server's: ``GrpcClientSettingsManager`` keeps the client's settings by client id and answers them
merged with the Proxy's:

- a producer (``publishing``): the backoff policy (3 attempts, exponential 10 ms .. 1 s, x2), whether
  the client checks message types against the route (on, as ``enableTopicMessageTypeCheck``) and the
  largest body (the store's ``maxMessageSize``);
- a consumer (``subscription``): defaults first (a batch of 32, long polling up to 20 s, not FIFO,
  17 attempts with the customized backoff of the 18 delay levels — a ``SubscriptionGroupConfig``'s
  defaults), then the client's own fields over them; the group's own config, when the consume side
  has one, over both (``SubscriptionDefaults``);
- the metric collector off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration

from server.grpc.v2 import definition

PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2
CONSUMER_BATCH_SIZE = 32
CONSUMER_MAX_LONG_POLLING_MS = 20_000

#: ``CustomizedRetryPolicy``'s default ``next``: the delay levels 1s .. 2h, in ms.
DEFAULT_RETRY_NEXT_MS = (
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
    480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SubscriptionDefaults:
    """What a consumer group's ``SubscriptionGroupConfig`` says (its defaults unless the group has one)."""

    consume_orderly: bool = False
    retry_max_times: int = 16
    retry_next_ms: Sequence[int] = DEFAULT_RETRY_NEXT_MS


def _duration(ms: int) -> Duration:
    duration = Duration()
    duration.FromMilliseconds(ms)
    return duration


def producer_settings(client: definition.Settings, max_body_size: int) -> definition.Settings:
    """``mergeProducerData`` then ``mergeMetric``."""
    settings = definition.Settings()
    settings.CopyFrom(client)
    backoff = settings.backoff_policy
    backoff.max_attempts = PRODUCER_MAX_ATTEMPTS
    backoff.exponential_backoff.initial.CopyFrom(_duration(PRODUCER_BACKOFF_INITIAL_MS))
    backoff.exponential_backoff.max.CopyFrom(_duration(PRODUCER_BACKOFF_MAX_MS))
    backoff.exponential_backoff.multiplier = PRODUCER_BACKOFF_MULTIPLIER
    settings.publishing.validate_message_type = True
    settings.publishing.max_body_size = max_body_size
    settings.metric.CopyFrom(definition.Metric(on=False))
    return settings


def _apply_group(settings: definition.Settings, group: SubscriptionDefaults) -> None:
    """``mergeSubscriptionData(settings, groupConfig)``."""
    settings.subscription.receive_batch_size = CONSUMER_BATCH_SIZE
    settings.subscription.long_polling_timeout.CopyFrom(_duration(CONSUMER_MAX_LONG_POLLING_MS))
    settings.subscription.fifo = group.consume_orderly
    settings.backoff_policy.max_attempts = group.retry_max_times + 1
    settings.backoff_policy.customized_backoff.CopyFrom(
        definition.CustomizedBackoff(next=[_duration(ms) for ms in group.retry_next_ms])
    )


def consumer_settings(client: definition.Settings, group: SubscriptionDefaults | None) -> definition.Settings:
    """``updateClientSettings`` (defaults under the client's fields), then the group's config over
    them when it has one (``mergeSubscriptionData``), then ``mergeMetric``."""
    settings = definition.Settings()
    _apply_group(settings, SubscriptionDefaults())
    settings.MergeFrom(client)
    if group is not None:
        _apply_group(settings, group)
    settings.metric.CopyFrom(definition.Metric(on=False))
    return settings
