"""The ramdisk's side of Ironic: lookup, heartbeat, inspection, network."""
