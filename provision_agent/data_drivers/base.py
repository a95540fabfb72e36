"""The data-driver plugin boundary.

A data driver translates one input document into a model.Layout. It does no I/O beyond having
been handed the parsed document. Drivers for foreign formats (Fuel, Ironic) usually translate
into a native-format document and let the native driver build the model, so that every format
gets the same schema checks; they report their own format's problems with their own locations.
"""

import abc


class DataDriver(abc.ABC):
    def __init__(self, data):
        self.data = data

    @abc.abstractmethod
    def layout(self):
        """Return a model.Layout, or raise errors.InputError listing every problem found."""
