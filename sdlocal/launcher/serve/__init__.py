"""`sdlocal serve`: one local endpoint that answers the SageMaker Python SDK v2.

SageMaker API calls (`X-Amz-Target: SageMaker.*`) are answered by sdlocal (launcher/serve/api.py:
training jobs run by `JobLifecycle`, as `sdlocal run` runs them); everything else (S3, CloudWatch
Logs, STS) goes to moto's server app in the same process (launcher/serve/app.py). The training
log reaches moto's CloudWatch Logs through launcher/serve/logs.py. Started in the foreground or
detached (launcher/serve/control.py), with the exports and SDK config file a script needs.
"""
