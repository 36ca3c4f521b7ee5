"""``FAQUrl.suggestTodo``: the pointer the broker and name server append to some remarks.

Every FAQ url of 4.9.7 is the same page, so one function serves them all.
"""

from __future__ import annotations

FAQ_URL = "http://rocketmq.apache.org/docs/faq/"


def suggest_todo(url: str = FAQ_URL) -> str:
    """``"\\nSee <url> for further details."``"""
    return f"\nSee {url} for further details."
