"""The tools: each one a unit (its schemas, hints and handler together) in its family's
module, and the table that lists them all (``table.py``)."""
