"""Command-line entry points (thin: parse arguments, call the core, show progress)."""
