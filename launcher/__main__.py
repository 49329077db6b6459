"""`python -m launcher` = `sdlocal`."""
from launcher.cli import main

main()
