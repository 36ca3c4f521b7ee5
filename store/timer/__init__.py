"""The files of 5.x timer messages (``TimerMessageStore``'s room): what was delivered, and how far.

The timer messages themselves are CommitLog records of ``rmq_sys_wheel_timer`` with their queue
entries, as every record; this room holds only the delivery log (``delivery_log``).
"""
