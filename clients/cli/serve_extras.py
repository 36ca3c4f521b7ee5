"""Which of ``serve``'s front doors this installation can open, and what to install for the others.

A base install (``pip install rmq-query``) serves lookups on the remoting ports and nothing else:
the gRPC port for RocketMQ 5 clients needs the ``[grpc]`` extra (grpcio, protobuf, the apache
``v2`` stubs of rocketmq-python-client, cryptography for its self-signed certificate) and the HTTP
port (the lookup page, the JSON API, ``/metrics``) the ``[console]`` extra (aiohttp,
prometheus_client). Whether a library is installed is asked of the import system (``find_spec``),
which imports nothing: ``serve`` still announces its remoting port before those libraries load.

A door the operator named (``--grpc-port N``, ``--http N``) whose libraries are missing stops the
start with one line naming the extra; a door that was only a default (HTTP always, gRPC under
``--writable``) stays closed with a warning, as a default port that is taken does
(``serve_ports.optional_front_doors``): ``serve`` with everything installed behaves as before.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass

from server.app import ServerSettings


@dataclass(frozen=True)
class FrontDoorLibraries:
    """What a front door imports, and the extra of ``rmq-query`` that installs it."""

    extra: str
    flag: str
    what: str
    #: (importable module, distribution to name in messages)
    modules: tuple[tuple[str, str], ...]


FRONT_DOORS: dict[str, FrontDoorLibraries] = {
    "grpc": FrontDoorLibraries(
        extra="grpc",
        flag="--grpc-port",
        what="the gRPC port for RocketMQ 5 clients",
        modules=(
            ("grpc", "grpcio"),
            ("google.protobuf", "protobuf"),
            ("rocketmq", "rocketmq-python-client"),
            ("cryptography", "cryptography"),
        ),
    ),
    "http": FrontDoorLibraries(
        extra="console",
        flag="--http",
        what="the HTTP port (lookup page, JSON API, /metrics)",
        modules=(("aiohttp", "aiohttp"), ("prometheus_client", "prometheus_client")),
    ),
}


class FrontDoorNotInstalled(Exception):
    """A front door the command line asked for cannot open: its libraries are not installed."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        return False


def missing_libraries(door: str) -> list[str]:
    """The distributions ``door`` needs that are not installed (empty: it can open)."""
    return [dist for module, dist in FRONT_DOORS[door].modules if not _installed(module)]


def install_hint(door: str, missing: list[str]) -> str:
    """``needs <missing> (not installed): pip install 'rmq-query[<extra>]'``."""
    return (
        f"needs {', '.join(missing)} (not installed): "
        f"pip install 'rmq-query[{FRONT_DOORS[door].extra}]' (or rmq-query[all])"
    )


def drop_uninstalled_doors(settings: ServerSettings) -> tuple[ServerSettings, list[str]]:
    """``settings`` without the default doors whose libraries are missing, and a warning for each.

    Raises ``FrontDoorNotInstalled`` (its message names the flag and the extra) for a door the
    operator named.
    """
    warnings: list[str] = []
    ports = {"grpc": settings.grpc_port, "http": settings.http_port}
    for door, port in ports.items():
        if port is None:
            continue
        missing = missing_libraries(door)
        if not missing:
            continue
        libraries, hint = FRONT_DOORS[door], install_hint(door, missing)
        if door not in settings.optional_front_doors:
            raise FrontDoorNotInstalled(f"{libraries.flag} {port}: {libraries.what} {hint}")
        warnings.append(f"serving without {libraries.what}: it {hint}")
        settings = dataclasses.replace(settings, **{f"{door}_port": None})
    return settings, warnings
