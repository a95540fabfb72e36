# Ironic's test package picks the threading backend; it must come before any other ironic import.
import ironic.tests.unit  # noqa: F401
