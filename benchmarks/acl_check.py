"""What ``serve --acl`` adds per request: ``AccessValidator.denial`` on a signed QUERY_MESSAGE.

    python -m benchmarks.acl_check [--seconds 1] [--rounds 3]

Times the check of a request signed by ``clients.acl.AclSigner`` as mqadmin signs it (six
extFields plus AccessKey and Signature, topic permitted by a topicPerms entry), the same request
signed without ``_UNIQUE_KEY_QUERY`` (the second signature form is then computed too), and a denied
one (wrong signature). Best of ``--rounds`` rounds, in checks per CPU-second.
"""

from __future__ import annotations

import argparse
import time

from clients.acl import AclSigner
from protocol.acl_signature import UNIQUE_KEY_QUERY, acl_signature
from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from server.acl.config import acl_config_from
from server.acl.validator import AccessValidator

ACCESS_KEY, SECRET_KEY = "rocketmq2", "12345678"


def _request() -> RemotingCommand:
    fields = {
        "topic": "TopicA",
        "key": "k-3",
        "maxNum": "64",
        "beginTimestamp": "0",
        "endTimestamp": str(2**63 - 1),
        UNIQUE_KEY_QUERY: "false",
    }
    request = RemotingCommand(code=RequestCode.QUERY_MESSAGE, ext_fields=fields)
    AclSigner(ACCESS_KEY, SECRET_KEY)(request)
    return request


def rate(validator: AccessValidator, request: RemotingCommand, seconds: float) -> float:
    count = 0
    start = time.process_time()
    while True:
        for _ in range(1000):
            validator.denial(request, "10.0.0.9")
        count += 1000
        used = time.process_time() - start
        if used >= seconds:
            return count / used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    validator = AccessValidator(
        acl_config_from(
            {"accounts": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY, "topicPerms": ["TopicA=SUB"]}]}
        )
    )
    signed = _request()
    assert validator.denial(signed, None) is None
    legacy = _request()
    assert legacy.ext_fields is not None
    legacy.ext_fields["Signature"] = acl_signature(
        legacy.ext_fields, None, SECRET_KEY, exclude=(UNIQUE_KEY_QUERY,)
    )
    assert validator.denial(legacy, None) is None
    denied = _request()
    assert denied.ext_fields is not None
    denied.ext_fields["Signature"] = "AAAA"
    assert validator.denial(denied, None) is not None
    print("| request | checks/CPU-s | us/check |")
    print("|---|---:|---:|")
    for name, request in (
        ("signed as mqadmin 4.9.7", signed),
        ("signed without _UNIQUE_KEY_QUERY", legacy),
        ("bad signature", denied),
    ):
        best = max(rate(validator, request, args.seconds) for _ in range(args.rounds))
        print(f"| {name} | {best:,.0f} | {1e6 / best:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
