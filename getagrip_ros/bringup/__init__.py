"""Which nodes run, with which parameters: one description for the launch files and `getagrip bringup`."""
