"""``python -m bpbc``: the same as the ``bpbc-screen`` command."""

from bpbc.server import command

if __name__ == "__main__":
    command()
