"""``python -m drkit`` runs the CLI (used by tests and supervisors that need a real process)."""

from drkit.cli import main

if __name__ == "__main__":  # spawned helper processes import this module too
    main()
