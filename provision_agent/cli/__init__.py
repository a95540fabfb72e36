"""The `provision` command: options, the input document, and the subcommands."""
