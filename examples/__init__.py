"""Runnable examples and the small example models irkit is tested on."""
