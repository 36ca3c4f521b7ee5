"""The reput: one walk of the CommitLog feeding an ordered list of dispatchers (4.9.7's
``ReputMessageService`` with ``CommitLogDispatcherBuildConsumeQueue`` and
``CommitLogDispatcherBuildIndex``).

``walk.Reput`` walks from one resume point (the least of what its dispatchers report as done) in
runs of whole, checked records, stops where the CommitLog's settled records end and applies the gap
rules (``store.commitlog.gaps``); ``dispatcher`` says what a dispatcher is handed; ``decode`` is what
a record means to the dispatchers (its consume queue entry, its index keys), shared with the Spark
decode tasks. The dispatchers keep their formats and crash safety in their own rooms
(``store.index.builder``, ``store.consumequeue.builder``).
"""
