"""`python -m sdlocal` = the `sdlocal` command."""
from sdlocal.launcher.cli import main

main()
