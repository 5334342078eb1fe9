"""`python -m dispersal` runs the command line."""

from dispersal.cli import main

main()
