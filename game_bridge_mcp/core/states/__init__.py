"""Saved states (docs/states.md): the journal of what was sent to a launched paused game
(``journal``), the state file (``file``), the session's states (``store``), re-execution
(``reexec``), ``save_state`` and ``list_states`` (``saving``), ``restore_state`` and
``fork_instance`` (``restoring``). The tools are core/tools/states.py."""
