"""sdlocal: Amazon SageMaker Debugger on your own machine.

One installed namespace: `sdlocal.trial` (smdebug's trial format and its storage), `sdlocal.hook`
(the training side), `sdlocal.evaluator` (the rule side) and `sdlocal.launcher` (the host side and
the `sdlocal` command). The only other name sdlocal installs is its `smdebug` facade.

In the repository these subpackages are the top-level folders trial/, hook/, evaluator/ and
launcher/: wheels place them under sdlocal/, editable installs map them (hatch_build.py).
"""
