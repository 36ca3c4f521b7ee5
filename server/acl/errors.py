"""The error a bad ``plain_acl.yml`` raises: reported once, when ``serve --acl`` loads the file."""

from __future__ import annotations


class AclConfigError(ValueError):
    """The ACL file cannot be read, is not YAML, or holds an entry RocketMQ would reject."""
