"""``python -m drkit`` runs the CLI (used by tests and supervisors that need a real process)."""

from drkit.cli import main

main()
