"""Recorded observations and what the small agents make of them (see ``record.py``)."""
