"""What the live machine is: its disks and what holds them, checked before the first write."""
