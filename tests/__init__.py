import os

# The repository's root, for tests that read its files (samples, docs, scripts) from any depth.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
