"""provision-agent: image-based bare-metal provisioning with real disk layouts."""
