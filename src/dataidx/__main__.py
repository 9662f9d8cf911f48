"""``python -m dataidx`` runs the CLI."""

from .cli import main

main()
