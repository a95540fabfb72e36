"""The data-driver plugin boundary (docs/extending.md "An input format: a data driver").

A data driver translates one input document into a model.Layout. It does no I/O beyond having
been handed the parsed document. Drivers for foreign formats (Fuel, Ironic, a vendor's)
usually translate into a native-format document and let the native driver build the model
(foreign.ForeignDriver.native_layout()), so that every format gets the same schema checks;
they report their own format's problems with their own locations.

The contract (stable, like provision_agent.api):

    input_format   "json" (default) or "yaml": how provision parses the input text for it
    __init__(data) the parsed document (dicts, lists, strings, numbers, booleans, None)
    layout()       a model.Layout, or InputError listing every problem, each located in the
                   input's own terms

and, for a driver subclassing foreign.ForeignDriver (a DataDriver):

    native_layout(native, origin)   the native driver's layout of a native document this
                   driver made; origin {native path: the input's path} relocates every
                   problem the native checks find (the longest native path that starts the
                   problem's location wins), and names the objects for the later checks
                   (validation, disk matching) by the input's paths too
"""

import abc


class DataDriver(abc.ABC):
    input_format = "json"

    def __init__(self, data):
        self.data = data

    @abc.abstractmethod
    def layout(self):
        """Return a model.Layout, or raise errors.InputError listing every problem found."""
