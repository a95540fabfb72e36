"""ACME's provision plug-in: an example of a vendor package kept outside provision's tree."""
