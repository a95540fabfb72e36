"""The real run: the one runner every command goes through, the executor, progress events, erase.
"""
