"""`python -m cutune` runs the command line."""

from cutune.cli import main

main()
