"""`python -m sdlocal` = `sdlocal`."""
from sdlocal.launcher.cli import main

main()
