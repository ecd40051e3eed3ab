"""What the command line and ``check`` show on a terminal: a progress line redrawn in place
(``progress.py``) and streams cleaned of what a game's text could do to a terminal (``text.py``)."""
