"""Images, read in the order the bytes flow: sources (file, HTTP) -> checksums (hashed on the
way) -> decompressors (zstd_frames tells a whole zstd stream from a cut one) -> pipeline (each
stage reads ahead in its own thread) -> blockwrite (the target) or formats (tar, qcow2, grow,
zeroing), with progress reported; writer ties them together and is what the executor calls.
"""
