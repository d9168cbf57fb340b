"""``python -m bpbc``: the same as the ``bpbc-screen`` command."""

from bpbc.cli import run

if __name__ == "__main__":
    run()
