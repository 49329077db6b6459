"""sdlocal: Amazon SageMaker Debugger on your own machine.

One installed namespace: `sdlocal.trial` (smdebug's trial format and its storage), `sdlocal.hook`
(the training side), `sdlocal.evaluator` (the rule side) and `sdlocal.launcher` (the host side and
the `sdlocal` command). The only other name sdlocal installs is its `smdebug` facade.

In the repository these subpackages are the folders sdlocal/trial, sdlocal/hook, sdlocal/evaluator
and sdlocal/launcher (the root's trial, hook, evaluator, launcher are symlinks to them): every tool
resolves `sdlocal.<package>.<module>` to its file in a checkout as it is.
"""
