"""Run ironic-python-agent's own raw-image write path once and print its wall time.

Run with the python of a venv where `pip install ironic-python-agent` was done:
    PY ipa_stream_write.py URL DEVICE SHA256
It calls StandbyExtension._stream_raw_image_onto_device, the path IPA takes for a raw
image when stream_raw_images is on (its default): requests iter_content(1 MiB) -> hash ->
f.write() on the device opened 'wb+', then its GPT fix-up and blkid. IPA has no
decompression on this path: a gzip/zstd image would be written to disk as compressed bytes.
"""

import sys
import time

from ironic_python_agent import config


def main():
    # What IPA's own entry point (ironic_python_agent.cmd.agent) does before anything else.
    config.populate_config()
    config.CONF([], project="ironic-python-agent")
    from ironic_python_agent.extensions import standby
    url, device, sha256 = sys.argv[1:4]
    ext = standby.StandbyExtension()
    ext.partition_uuids = {}        # normally set by the deploy step that precedes this call
    info = {"id": "bench", "urls": [url], "disk_format": "raw", "stream_raw_images": True,
            "os_hash_algo": "sha256", "os_hash_value": sha256}
    start = time.monotonic()
    ext._stream_raw_image_onto_device(info, device)
    print(f"{time.monotonic() - start:.3f}")


if __name__ == "__main__":
    main()
