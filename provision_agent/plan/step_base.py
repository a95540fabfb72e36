"""The base of every plan step (steps.py holds the vocabulary): a dataclass whose fields are the
step's arguments."""

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

# Fields whose None is left out of `args`, so that plans without them read as they always did.
OPTIONAL = {"optional": True}
# A field shown as <redacted> in the plan (field(metadata=SECRET)), as secret_fields does.
SECRET = {"secret": True}
MARK = "<redacted>"


@dataclass
class Step:
    kind: ClassVar[str] = ""
    # names of fields shown as MARK in the plan (a plug-in's secret_fields)
    secret_fields: ClassVar[frozenset] = frozenset()
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

    def shown_args(self):
        """args with the secret fields' values replaced by MARK."""
        secret = {f.metadata.get("name", f.name) for f in dataclasses.fields(self)
                  if f.metadata.get("secret") or f.name in self.secret_fields}
        return {k: (MARK if k in secret and v not in (None, "", [], {}) else v)
                for k, v in self.args.items()}

    def to_dict(self):
        return {"kind": self.kind, "args": self.shown_args(), "description": self.description}
