"""Fuel's provision.json (docs/nailgun-mapping.md)."""
