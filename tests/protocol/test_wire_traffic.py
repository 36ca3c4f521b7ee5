"""Real traffic between real RocketMQ clients and a real 4.9.7 name server and broker: every frame
decodes to what ``frames.json`` recorded and re-encodes byte-exact; each direction's stream decodes
the same however the socket chunks it."""

from __future__ import annotations

import json
import random
from pathlib import Path

from protocol.codes import LanguageCode, SerializeType
from protocol.frame import FrameDecoder, decode_frame, encode_frame


def _scenarios(vectors_dir: Path) -> list[tuple[Path, list[dict]]]:
    scenarios = [
        (path, json.loads((path / "frames.json").read_text(encoding="utf-8")))
        for path in sorted((vectors_dir / "wire").iterdir())
        if (path / "frames.json").exists()
    ]
    assert len(scenarios) >= 14, "wire scenarios are missing"
    return scenarios


def test_every_frame_decodes_to_the_recorded_header(vectors_dir: Path) -> None:
    count = 0
    for scenario, frames in _scenarios(vectors_dir):
        for frame in frames:
            where = f"{scenario.name}/{frame['file']}"
            data = (scenario / frame["file"]).read_bytes()
            assert len(data) == frame["length"], where
            cmd = decode_frame(data)
            header = frame["header"]
            assert cmd.serialize_type is SerializeType[frame["serializeType"]], where
            assert cmd.code == header["code"], where
            assert cmd.flag == header["flag"], where
            assert cmd.opaque == header["opaque"], where
            assert cmd.version == header["version"], where
            assert cmd.language is LanguageCode[header["language"]], where
            assert cmd.remark == header.get("remark"), where
            assert cmd.ext_fields == header.get("extFields"), where
            if header.get("extFields") is not None:
                assert list(cmd.ext_fields or ()) == list(header["extFields"]), where
            assert len(cmd.body or b"") == frame["bodyLength"], where
            if frame["bodyText"] is not None:
                assert cmd.body is not None and cmd.body.decode("utf-8") == frame["bodyText"], where
            assert cmd.is_response == ("_resp_" in frame["file"]), where
            count += 1
    assert count > 100


def test_every_frame_reencodes_byte_exact(vectors_dir: Path) -> None:
    for scenario, frames in _scenarios(vectors_dir):
        for frame in frames:
            data = (scenario / frame["file"]).read_bytes()
            assert encode_frame(decode_frame(data)) == data, f"{scenario.name}/{frame['file']}"


def test_each_direction_decodes_from_random_chunks(vectors_dir: Path) -> None:
    rng = random.Random(20261120)
    for scenario, frames in _scenarios(vectors_dir):
        streams: dict[tuple[str, str], list[bytes]] = {}
        for frame in frames:
            streams.setdefault((frame["src"], frame["dst"]), []).append(
                (scenario / frame["file"]).read_bytes()
            )
        for direction, datas in streams.items():
            stream = b"".join(datas)
            expected = [decode_frame(data) for data in datas]
            for _ in range(5):
                decoder = FrameDecoder()
                got = []
                pos = 0
                while pos < len(stream):
                    step = rng.choice((1, 3, 7, 64, 1000, len(stream)))
                    got.extend(decoder.feed(stream[pos : pos + step]))
                    pos += step
                assert got == expected, f"{scenario.name} {direction}"
                assert decoder.buffered == 0
