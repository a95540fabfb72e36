"""Walk zstd frame and block headers to tell a complete stream from a truncated one.

zstandard's streaming reader (the only API with bounded output, which matters because a run
of zeros inflates ~30000:1) returns a clean EOF on a truncated input. Walking the headers
(RFC 8878 sections 3.1.1 and 3.1.1.2) costs one small parse per 128 KiB block and tells us
whether the input ended exactly at a frame end.
"""

ZSTD_MAGIC = 0xFD2FB528


class FrameWalker:
    def __init__(self):
        self._buf = b""         # header bytes not yet parsed
        self._skip = 0          # bytes of block/frame content to pass over
        self._state = "magic"   # magic | fhd | block | checksum
        self._need = 4
        self._checksum = False
        self.frames = 0

    def feed(self, data):
        view = memoryview(data)
        while len(view):
            if self._skip:
                step = min(self._skip, len(view))
                self._skip -= step
                view = view[step:]
                continue
            take = min(self._need - len(self._buf), len(view))
            self._buf += bytes(view[:take])
            view = view[take:]
            if len(self._buf) == self._need:
                self._advance()

    def _advance(self):
        buf, state = self._buf, self._state
        if state == "magic":
            magic = int.from_bytes(buf, "little")
            if magic == ZSTD_MAGIC:
                self._set("fhd", 1)
            elif magic & 0xFFFFFFF0 == 0x184D2A50:     # skippable frame: 4-byte size follows
                self._set("skipsize", 4)
            else:
                raise ValueError("not a zstd frame")
        elif state == "skipsize":
            self._skip = int.from_bytes(buf, "little")
            self._set("magic", 4)
        elif state == "fhd":
            fhd = buf[0]
            fcs_flag, single, self._checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, \
                bool((fhd >> 2) & 1), fhd & 3
            fcs = (1 if single else 0, 2, 4, 8)[fcs_flag]
            self._skip = (0 if single else 1) + (0, 1, 2, 4)[dict_flag] + fcs
            self._set("block", 3)
        elif state == "block":
            header = int.from_bytes(buf, "little")
            last, btype, bsize = header & 1, (header >> 1) & 3, header >> 3
            if btype == 3:
                raise ValueError("reserved zstd block type")
            self._skip = 1 if btype == 1 else bsize
            if not last:
                self._set("block", 3)
            elif self._checksum:
                self._skip += 4
                self._end_frame()
            else:
                self._end_frame()

    def _end_frame(self):
        self.frames += 1
        self._set("magic", 4)

    def _set(self, state, need):
        self._state, self._need, self._buf = state, need, b""

    @property
    def complete(self):
        """True when the input seen so far ends exactly after a whole frame."""
        return self.frames > 0 and self._state == "magic" and not self._buf and not self._skip
