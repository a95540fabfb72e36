"""The base of every plan step (steps.py holds the vocabulary): a dataclass whose fields are the
step's arguments."""

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

# Fields whose None is left out of `args`, so that plans without them read as they always did.
OPTIONAL = {"optional": True}


@dataclass
class Step:
    kind: ClassVar[str] = ""
    # A short human sentence for the printed plan and for progress events.
    description: str = field(default="", kw_only=True)

    @property
    def args(self):
        """The step's arguments as the JSON plan shows them."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name == "description":
                continue
            value = getattr(self, f.name)
            if value is None and f.metadata.get("optional"):
                continue
            out[f.metadata.get("name", f.name)] = value
        return out

    def to_dict(self):
        return {"kind": self.kind, "args": self.args, "description": self.description}
