"""The IAM and STS calls the SageMaker Python SDK v3 makes before it creates a training job, answered
as AWS answers them for a role that is permitted to train (moto has no SimulatePrincipalPolicy: it
answered with an HTML 500 that botocore cannot parse, and ModelTrainer died being constructed).

`sagemaker.train.ModelTrainer(role=...)` validates its role (sagemaker.core.helper.iam_role_resolver):
`iam:SimulatePrincipalPolicy` for the actions training needs (every one `allowed` here), then
`iam:GetRole` for the role's trust policy (here: any role exists and trusts sagemaker.amazonaws.com).
Without `role=` it asks `sts:GetCallerIdentity` who it is and uses that role: here the caller is
the assumed role `SDLOCAL_ROLE`. `train()` simulates `s3:PutObject` on the default bucket. There is
no IAM here: nothing is denied, nothing is stored. Every other IAM and STS call goes to moto.
"""
from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import parse_qs, quote
from xml.sax.saxutils import escape

from sdlocal.evaluator.status import ACCOUNT

SDLOCAL_ROLE = "SageMakerExecutionRole"  # who the caller is (an assumed role, as in a SageMaker notebook)
SESSION = "sdlocal"
IAM_NS = "https://iam.amazonaws.com/doc/2010-05-08/"
STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
_SERVICE = re.compile(r"Credential=[^/,]+/\d{8}/[^/]+/([a-z0-9-]+)/aws4_request")
TRUST_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def signing_service(authorization: str) -> str | None:
    """The service a SigV4 `Authorization` header was signed for (iam, sts, s3, ...)."""
    m = _SERVICE.search(authorization or "")
    return m.group(1) if m else None


def _members(params: Mapping[str, list[str]], name: str) -> list[str]:
    """`Name.member.1`, `Name.member.2`, ... of a query-protocol request, in order."""
    found = []
    for key, values in params.items():
        prefix = f"{name}.member."
        if key.startswith(prefix) and key[len(prefix):].isdigit():
            found.append((int(key[len(prefix):]), values[0]))
    return [v for _, v in sorted(found)]


def _response(action: str, namespace: str, result: str) -> bytes:
    return (f'<{action}Response xmlns="{namespace}"><{action}Result>{result}</{action}Result>'
            f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
            f"</{action}Response>").encode()


def _role(name: str) -> str:
    role_id = "AROA" + uuid.uuid5(uuid.NAMESPACE_URL, name).hex[:17].upper()
    return (f"<Role><Path>/</Path><RoleName>{escape(name)}</RoleName><RoleId>{role_id}</RoleId>"
            f"<Arn>arn:aws:iam::{ACCOUNT}:role/{escape(name)}</Arn><CreateDate>2024-01-01T00:00:00Z</CreateDate>"
            f"<AssumeRolePolicyDocument>{escape(quote(json.dumps(TRUST_POLICY)))}</AssumeRolePolicyDocument>"
            "<MaxSessionDuration>3600</MaxSessionDuration></Role>")


def get_role(params: Mapping[str, list[str]]) -> bytes:
    name = (params.get("RoleName") or [""])[0]
    return _response("GetRole", IAM_NS, _role(name))


def simulate_principal_policy(params: Mapping[str, list[str]]) -> bytes:
    """Every action on every resource (`*` when none is named) `allowed`, in one page."""
    actions = _members(params, "ActionNames")
    resources: Sequence[str] = _members(params, "ResourceArns") or ["*"]
    results = "".join(
        f"<member><EvalActionName>{escape(action)}</EvalActionName><EvalResourceName>{escape(resource)}"
        "</EvalResourceName><EvalDecision>allowed</EvalDecision><MatchedStatements/><MissingContextValues/></member>"
        for action in actions for resource in resources)
    return _response("SimulatePrincipalPolicy", IAM_NS,
                     f"<EvaluationResults>{results}</EvaluationResults><IsTruncated>false</IsTruncated>")


def get_caller_identity(params: Mapping[str, list[str]]) -> bytes:
    arn = f"arn:aws:sts::{ACCOUNT}:assumed-role/{SDLOCAL_ROLE}/{SESSION}"
    role_id = "AROA" + uuid.uuid5(uuid.NAMESPACE_URL, SDLOCAL_ROLE).hex[:17].upper()
    return _response("GetCallerIdentity", STS_NS,
                     f"<Arn>{arn}</Arn><UserId>{role_id}:{SESSION}</UserId><Account>{ACCOUNT}</Account>")


HANDLERS: dict[tuple[str, str], Callable[[Mapping[str, list[str]]], bytes]] = {
    ("iam", "GetRole"): get_role,
    ("iam", "SimulatePrincipalPolicy"): simulate_principal_policy,
    ("sts", "GetCallerIdentity"): get_caller_identity,
}


def answer(service: str | None, body: bytes) -> bytes | None:
    """The XML answer to an IAM/STS query-protocol request this module answers, else None."""
    if service not in ("iam", "sts"):
        return None
    params = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    action = (params.get("Action") or [""])[0]
    handler = HANDLERS.get((service, action))
    return None if handler is None else handler(params)
